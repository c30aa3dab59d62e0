#pragma once
// DatagramLayout: how a received datagram lies in a loop receive buffer, the same on every
// backend (what a user receives is io/Datagram.h's ReceivedDatagram, made from this).
// A multishot datagram receive (OpCode::kRecvMsgMultishot) fills one buffer per datagram:
//
//   0              16                     16 + name_capacity
//   +--------------+----------------------+--------------------------+-----------------------+
//   | header       | source address       | ancillary data           | payload               |
//   | 4 x uint32   | name_capacity bytes  | control_capacity bytes   | payload_length bytes  |
//   +--------------+----------------------+--------------------------+-----------------------+
//   header: name_length (the source's full length, even if cut), control_length (used),
//           payload_length (bytes present, or more if cut), flags (recvmsg's msg_flags: MSG_TRUNC =
//           the datagram was longer than the buffer's room and its end is lost)
//
// and the completion's result is the bytes used: 16 + name_capacity + control_capacity +
// payload_length. The capacities are the msg_namelen and msg_controllen of the msghdr the
// operation was given. This is io_uring's own layout (struct io_uring_recvmsg_out and what
// follows; the uring backend static_asserts that they match), and the epoll backend, which
// receives with recvmmsg, writes the same.
//
// Thread contract: none (plain data and a pure function).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include <sys/socket.h>

namespace ucp::detail {

struct DatagramHeader {
  uint32_t name_length;
  uint32_t control_length;
  uint32_t payload_length;
  uint32_t flags;
};
static_assert(sizeof(DatagramHeader) == 16);

/// Room for the source address that fits IPv4 and IPv6 (sockaddr_in6 is 28 bytes) and keeps the
/// payload 16-byte aligned behind the header.
inline constexpr uint32_t kDatagramNameBytes = 32;
/// Bytes in front of the payload with kDatagramNameBytes and no ancillary data.
inline constexpr uint32_t kDatagramHeadroom = sizeof(DatagramHeader) + kDatagramNameBytes;

/// One datagram found in a receive buffer; points into that buffer.
struct DatagramView {
  std::span<std::byte> payload;
  const sockaddr* source = nullptr;  // null when the sender had no address (unnamed socket)
  socklen_t source_length = 0;       // bytes of it present (at most name_capacity)
  bool truncated = false;            // the datagram was longer than `payload`: its end is lost
};

/// Reads the datagram in `buffer`, which a completion reported `used` bytes of. nullopt when
/// the bytes cannot be a datagram of this layout (shorter than the header and capacities).
inline std::optional<DatagramView> parse_datagram(std::byte* buffer, uint32_t used,
                                                  uint32_t name_capacity,
                                                  uint32_t control_capacity = 0) noexcept {
  const uint64_t headroom = uint64_t{sizeof(DatagramHeader)} + name_capacity + control_capacity;
  if (used < headroom) return std::nullopt;
  DatagramHeader header;
  std::memcpy(&header, buffer, sizeof header);
  const auto present = static_cast<uint32_t>(used - headroom);
  DatagramView view;
  view.payload = {buffer + headroom, present};
  const uint32_t name_bytes =
      header.name_length < name_capacity ? header.name_length : name_capacity;
  if (name_bytes > 0) {
    view.source = reinterpret_cast<const sockaddr*>(buffer + sizeof(DatagramHeader));
    view.source_length = name_bytes;
  }
  view.truncated = (header.flags & MSG_TRUNC) != 0 || header.payload_length > present;
  return view;
}

}  // namespace ucp::detail
