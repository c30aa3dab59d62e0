#include "ucp/net/Framing.h"

#include <string>

namespace ucp {

namespace {

class FramingCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "ucp.framing"; }
  std::string message(int value) const override {
    switch (static_cast<FramingErrc>(value)) {
      case FramingErrc::kEndOfStream:
        return "the peer closed the stream";
      case FramingErrc::kTruncated:
        return "the peer closed the stream inside a message";
      case FramingErrc::kTooLong:
        return "message longer than its maximum";
    }
    return "unknown framing error";
  }
};

}  // namespace

const std::error_category& framing_category() noexcept {
  static const FramingCategory category;
  return category;
}

namespace detail {

uint32_t decode_length(LengthPrefix prefix, std::span<const std::byte> bytes) noexcept {
  uint32_t length = 0;
  for (size_t i = 0; i < static_cast<size_t>(prefix); ++i) {
    length = (length << 8) | std::to_integer<uint32_t>(bytes[i]);
  }
  return length;
}

size_t encode_length(LengthPrefix prefix, uint32_t length, std::span<std::byte, 4> out) noexcept {
  const size_t size = static_cast<size_t>(prefix);
  for (size_t i = 0; i < size; ++i) {
    out[size - 1 - i] = static_cast<std::byte>(length & 0xff);
    length >>= 8;
  }
  return size;
}

size_t find_delimiter(std::string_view bytes, std::string_view delimiter, size_t from) noexcept {
  return from > bytes.size() ? std::string_view::npos : bytes.find(delimiter, from);
}

}  // namespace detail
}  // namespace ucp
