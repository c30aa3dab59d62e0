#pragma once
// The RFC 6455 frame (§5.2), the parts both directions share: opcodes, the header encoder, the
// (un)masking of payloads and the close status codes an endpoint may send.
//
//    0                   1                   2                   3
//    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//   +-+-+-+-+-------+-+-------------+-------------------------------+
//   |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//   |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//   |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//   | |1|2|3|       |K|             |                               |
//   +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//   |     Extended payload length continued, if payload len == 127  |
//   + - - - - - - - - - - - - - - - +-------------------------------+
//   |                               |Masking-key, if MASK set to 1  |
//   +-------------------------------+-------------------------------+
//   | Masking-key (continued)       |          Payload Data         |
//   +-------------------------------- - - - - - - - - - - - - - - - +

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace ucp::ws::detail {

enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

constexpr bool is_control(Opcode op) noexcept { return (static_cast<uint8_t>(op) & 0x8) != 0; }

/// 2 bytes, up to 8 of extended length, 4 of masking key.
inline constexpr size_t kMaxFrameHeaderBytes = 14;
/// Control frames carry at most this much (§5.5); a close frame's reason 2 bytes less.
inline constexpr size_t kMaxControlPayload = 125;

/// Writes a frame header into `out` (kMaxFrameHeaderBytes of room) and returns its length.
/// `mask_key` (4 bytes) sets the MASK bit and is written last; null for unmasked frames.
size_t encode_frame_header(std::byte* out, Opcode opcode, bool fin, bool rsv1, uint64_t length,
                           const std::byte* mask_key) noexcept;

/// XORs `data` with the masking key in place (§5.3), from byte `phase` (0..3) of the key, and
/// advances `phase` past it, so one payload can be unmasked in pieces. Eight bytes at a time.
inline void apply_mask(std::span<std::byte> data, const std::byte* key, uint32_t& phase) noexcept {
  std::byte rotated[8];
  for (int i = 0; i < 8; ++i) rotated[i] = key[(phase + static_cast<uint32_t>(i)) & 3];
  uint64_t word_mask;
  std::memcpy(&word_mask, rotated, 8);
  std::byte* p = data.data();
  size_t n = data.size();
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= word_mask;
    std::memcpy(p, &word, 8);
    p += 8;
    n -= 8;
  }
  for (size_t i = 0; i < n; ++i) p[i] ^= rotated[i];
  phase = static_cast<uint32_t>((phase + data.size()) & 3);
}

/// A status code an endpoint may put in a close frame (§7.4): 1000-1003, 1007-1014 (the IANA
/// registry) and 3000-4999 (libraries and applications). 1004-1006 and 1015 are reserved for
/// reporting and must never be sent; 1016-2999 are reserved for future RFCs.
constexpr bool valid_close_code(uint16_t code) noexcept {
  if (code >= 3000 && code <= 4999) return true;
  if (code < 1000 || code > 1014) return false;
  return code != 1004 && code != 1005 && code != 1006;
}

}  // namespace ucp::ws::detail
