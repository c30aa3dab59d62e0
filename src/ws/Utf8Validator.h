#pragma once
// Utf8Validator: checks UTF-8 as it streams by, piece after piece, and says no at the first
// byte that cannot be part of well-formed UTF-8 (Unicode 15, Table 3-7): overlong forms,
// surrogates (ED A0..BF), code points above U+10FFFF and stray continuation bytes are refused
// as soon as the byte that rules them out arrives, not at the end of the message. That is what
// RFC 6455 §8.1 asks of a text message (fail fast, also across fragments and reads).
//
// ASCII runs are skipped eight bytes at a time; the state between pieces is one byte.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace ucp::ws::detail {

class Utf8Validator {
 public:
  /// Checks the next piece. False at the first invalid byte (the validator then stays failed).
  bool feed(std::span<const std::byte> bytes) noexcept {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    const uint8_t* const end = p + bytes.size();
    uint8_t state = state_;
    while (p < end) {
      if (state == kAccept) {
        // Whole words of ASCII at a time: the usual text is all ASCII.
        while (end - p >= 8) {
          uint64_t word;
          std::memcpy(&word, p, 8);
          if ((word & 0x8080808080808080ULL) != 0) break;
          p += 8;
        }
        while (p < end && *p < 0x80) ++p;
        if (p == end) break;
      }
      state = step(state, *p++);
      if (state == kReject) {
        state_ = kReject;
        return false;
      }
    }
    state_ = state;
    return true;
  }
  bool feed(std::string_view text) noexcept {
    return feed(std::as_bytes(std::span(text.data(), text.size())));
  }
  /// No sequence is left open: what was fed so far is complete UTF-8.
  bool complete() const noexcept { return state_ == kAccept; }
  bool failed() const noexcept { return state_ == kReject; }
  void reset() noexcept { state_ = kAccept; }

  /// The whole of `text` is well-formed UTF-8.
  static bool valid(std::span<const std::byte> text) noexcept {
    Utf8Validator v;
    return v.feed(text) && v.complete();
  }

 private:
  enum : uint8_t {
    kAccept,
    kTail1,  // one more 80..BF
    kTail2,  // two more
    kTail3,  // three more
    kE0,     // after E0: A0..BF (no overlong 3-byte forms)
    kED,     // after ED: 80..9F (no surrogates)
    kF0,     // after F0: 90..BF (no overlong 4-byte forms)
    kF4,     // after F4: 80..8F (nothing above U+10FFFF)
    kReject,
  };

  static uint8_t step(uint8_t state, uint8_t byte) noexcept {
    const bool tail = byte >= 0x80 && byte <= 0xBF;
    switch (state) {
      case kAccept:
        if (byte < 0x80) return kAccept;
        if (byte >= 0xC2 && byte <= 0xDF) return kTail1;
        if (byte == 0xE0) return kE0;
        if ((byte >= 0xE1 && byte <= 0xEC) || byte == 0xEE || byte == 0xEF) return kTail2;
        if (byte == 0xED) return kED;
        if (byte == 0xF0) return kF0;
        if (byte >= 0xF1 && byte <= 0xF3) return kTail3;
        if (byte == 0xF4) return kF4;
        return kReject;
      case kTail1:
        return tail ? kAccept : kReject;
      case kTail2:
        return tail ? kTail1 : kReject;
      case kTail3:
        return tail ? kTail2 : kReject;
      case kE0:
        return byte >= 0xA0 && byte <= 0xBF ? kTail1 : kReject;
      case kED:
        return byte >= 0x80 && byte <= 0x9F ? kTail1 : kReject;
      case kF0:
        return byte >= 0x90 && byte <= 0xBF ? kTail2 : kReject;
      case kF4:
        return byte >= 0x80 && byte <= 0x8F ? kTail2 : kReject;
      default:
        return kReject;
    }
  }

  uint8_t state_ = kAccept;
};

}  // namespace ucp::ws::detail
