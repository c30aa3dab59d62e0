#include "Frame.h"

namespace ucp::ws::detail {

size_t encode_frame_header(std::byte* out, Opcode opcode, bool fin, bool rsv1, uint64_t length,
                           const std::byte* mask_key) noexcept {
  out[0] =
      static_cast<std::byte>((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | static_cast<uint8_t>(opcode));
  const uint8_t mask_bit = mask_key != nullptr ? 0x80 : 0;
  size_t n = 2;
  // The shortest length encoding, as §5.2 requires.
  if (length < 126) {
    out[1] = static_cast<std::byte>(mask_bit | length);
  } else if (length <= 0xFFFF) {
    out[1] = static_cast<std::byte>(mask_bit | 126);
    out[2] = static_cast<std::byte>(length >> 8);
    out[3] = static_cast<std::byte>(length);
    n = 4;
  } else {
    out[1] = static_cast<std::byte>(mask_bit | 127);
    for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<std::byte>(length >> (56 - 8 * i));
    n = 10;
  }
  if (mask_key != nullptr) {
    std::memcpy(out + n, mask_key, 4);
    n += 4;
  }
  return n;
}

}  // namespace ucp::ws::detail
