#pragma once
// ChunkLine: reads the size line of one chunk of a chunked body (RFC 9112 §7.1), extensions
// and all, byte by byte as the line arrives in any number of pieces.
//
//   chunk-size [ chunk-ext ] CRLF
//   chunk-ext     = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//   chunk-ext-val = token / quoted-string          (quoted-pair inside: "\" any VCHAR)
//
// RequestParser reads every chunk-size line with it and hands llhttp only the size: llhttp
// 8.1 refuses valid extensions (BWS, quoted-pairs, a value followed by another extension) and
// accepts an empty name. Nothing is kept of the line but the size; the extensions are
// checked, counted and dropped.
//
// Thread contract: one thread at a time (a member of RequestParser).

#include <cstdint>
#include <string_view>

namespace ucp::http::detail {

class ChunkLine {
 public:
  enum class Result : uint8_t {
    kMore,     // every byte of the input consumed; the line goes on
    kDone,     // the line ended (its CRLF consumed): size() is the chunk's size
    kInvalid,  // a byte the grammar does not allow: reason() says which rule
  };

  /// A new line begins with the next byte read.
  void start() noexcept {
    state_ = State::kFirstDigit;
    size_ = 0;
    extension_bytes_ = 0;
  }
  /// Whether a line is being read (between start() and the end of the line or an error).
  bool active() const noexcept { return state_ != State::kIdle; }
  /// Consumes from the front of `input`, up to the end of the line.
  Result read(std::string_view& input) noexcept;

  uint64_t size() const noexcept { return size_; }
  /// Bytes of the line after the size (extensions and their whitespace), so far.
  uint32_t extension_bytes() const noexcept { return extension_bytes_; }
  const char* reason() const noexcept { return reason_; }

 private:
  enum class State : uint8_t {
    kIdle,
    kFirstDigit,   // the first hex digit
    kDigits,       // more digits, BWS, ';' or CR
    kBeforeSemi,   // BWS before ';' (after the size or a value)
    kAfterSemi,    // BWS after ';', then a name
    kName,         // the name's tchars, BWS, '=', ';' or CR
    kAfterName,    // BWS after a name: '=' or ';'
    kAfterEquals,  // BWS after '=', then a token or a quoted-string
    kToken,        // a token value
    kQuoted,       // inside a quoted-string
    kQuotedPair,   // after '\' inside it
    kAfterQuoted,  // after the closing quote: BWS, ';' or CR
    kLineFeed,     // after CR
  };
  Result fail(const char* reason) noexcept {
    state_ = State::kIdle;
    reason_ = reason;
    return Result::kInvalid;
  }

  State state_ = State::kIdle;
  uint32_t extension_bytes_ = 0;
  uint64_t size_ = 0;
  const char* reason_ = "";
};

}  // namespace ucp::http::detail
