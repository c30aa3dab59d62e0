#pragma once
// Datagram: what a UDP receive hands out (UdpSocket::receive_batch), and the size limits of
// UDP itself. How a datagram lies in a loop receive buffer underneath is the loop's business
// (io/detail/DatagramLayout.h).
//
// Thread contract: none (plain data); a ReceivedDatagram's lease follows BufferLease's rules.

#include <cstdint>

#include <sys/socket.h>

#include "ucp/io/BufferLease.h"

namespace ucp {

/// One received datagram: its payload lent (the loop's receive buffer, or a pool block), and
/// where it came from.
struct ReceivedDatagram {
  BufferLease data;
  sockaddr_storage source{};
  socklen_t source_length = 0;
  bool truncated = false;  // longer than the buffer could hold: its end was lost
};

/// The largest UDP payload: 65,535 - 8 (UDP header) over IPv6; IPv4 allows 20 bytes less.
inline constexpr uint32_t kMaxUdpPayload = 65527;
inline constexpr uint32_t kMaxUdpPayloadIpv4 = 65507;

}  // namespace ucp
