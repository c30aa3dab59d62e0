#pragma once
// Datagram: what a UDP receive hands out (UdpSocket::receive_batch lends a ReceivedDatagram;
// a UdpSocket::on_datagram handler is shown a DatagramRef), and the size limits of UDP itself. How
// a datagram lies in a loop receive buffer underneath is the loop's business
// (io/detail/DatagramLayout.h).
//
// Thread contract: none (plain data); a ReceivedDatagram's lease follows BufferLease's rules.

#include <cstddef>
#include <cstdint>
#include <span>

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

/// One received datagram as a handler sees it, during the call only: its bytes lie in the
/// loop's receive buffer, which goes back to the loop when the handler returns (copy what must
/// outlive the call).
struct DatagramRef {
  std::span<const std::byte> data;
  const sockaddr* source = nullptr;  // null when the sender had no address
  socklen_t source_length = 0;
  bool truncated = false;  // longer than the buffer could hold: its end was lost
};

/// The largest UDP payload: 65,535 - 8 (UDP header) over IPv6; IPv4 allows 20 bytes less.
inline constexpr uint32_t kMaxUdpPayload = 65527;
inline constexpr uint32_t kMaxUdpPayloadIpv4 = 65507;

}  // namespace ucp
