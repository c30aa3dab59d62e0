#include "ChunkLine.h"

#include <cstddef>

namespace ucp::http::detail {
namespace {

bool is_space(unsigned char c) noexcept { return c == ' ' || c == '\t'; }

/// tchar (RFC 9110 §5.6.2).
bool is_token_char(unsigned char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

/// qdtext (RFC 9110 §5.6.4): HTAB, SP, visible characters but '"' and '\', obs-text.
bool is_quoted_text(unsigned char c) noexcept {
  return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) ||
         (c >= 0x5D && c <= 0x7E) || c >= 0x80;
}

/// What a quoted-pair may escape: HTAB, SP, VCHAR, obs-text.
bool is_pair_text(unsigned char c) noexcept { return c == '\t' || c == ' ' || c >= 0x21; }

int hex_value(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

ChunkLine::Result ChunkLine::read(std::string_view& input) noexcept {
  size_t i = 0;
  Result result = Result::kMore;
  for (; i < input.size() && result == Result::kMore; ++i) {
    const auto c = static_cast<unsigned char>(input[i]);
    const bool size_digit =
        (state_ == State::kFirstDigit || state_ == State::kDigits) && hex_value(c) >= 0;
    if (!size_digit && c != '\r' && state_ != State::kLineFeed) ++extension_bytes_;
    switch (state_) {
      case State::kIdle:
        return fail("chunk line read after its end");
      case State::kFirstDigit:
      case State::kDigits: {
        const int digit = hex_value(c);
        if (digit >= 0) {
          if (size_ > (UINT64_MAX >> 4)) return fail("chunk size overflows");
          size_ = size_ << 4 | static_cast<uint64_t>(digit);
          state_ = State::kDigits;
        } else if (state_ == State::kFirstDigit) {
          return fail("chunk size without a hex digit");
        } else if (is_space(c)) {
          state_ = State::kBeforeSemi;
        } else if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (c == '\r') {
          state_ = State::kLineFeed;
        } else {
          return fail("invalid character in chunk size");
        }
        break;
      }
      case State::kBeforeSemi:
        if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (!is_space(c)) {
          return fail("chunk extension without ';'");
        }
        break;
      case State::kAfterSemi:
        if (is_token_char(c)) {
          state_ = State::kName;
        } else if (!is_space(c)) {
          return fail("chunk extension without a name");
        }
        break;
      case State::kName:
        if (c == '=') {
          state_ = State::kAfterEquals;
        } else if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (is_space(c)) {
          state_ = State::kAfterName;
        } else if (c == '\r') {
          state_ = State::kLineFeed;
        } else if (!is_token_char(c)) {
          return fail("invalid character in a chunk extension name");
        }
        break;
      case State::kAfterName:
        if (c == '=') {
          state_ = State::kAfterEquals;
        } else if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (!is_space(c)) {
          return fail("invalid character after a chunk extension name");
        }
        break;
      case State::kAfterEquals:
        if (c == '"') {
          state_ = State::kQuoted;
        } else if (is_token_char(c)) {
          state_ = State::kToken;
        } else if (!is_space(c)) {
          return fail("chunk extension without a value after '='");
        }
        break;
      case State::kToken:
        if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (is_space(c)) {
          state_ = State::kBeforeSemi;
        } else if (c == '\r') {
          state_ = State::kLineFeed;
        } else if (!is_token_char(c)) {
          return fail("invalid character in a chunk extension value");
        }
        break;
      case State::kQuoted:
        if (c == '"') {
          state_ = State::kAfterQuoted;
        } else if (c == '\\') {
          state_ = State::kQuotedPair;
        } else if (!is_quoted_text(c)) {
          return fail("invalid character in a quoted chunk extension value");
        }
        break;
      case State::kQuotedPair:
        if (!is_pair_text(c)) return fail("invalid quoted-pair in a chunk extension value");
        state_ = State::kQuoted;
        break;
      case State::kAfterQuoted:
        if (c == ';') {
          state_ = State::kAfterSemi;
        } else if (is_space(c)) {
          state_ = State::kBeforeSemi;
        } else if (c == '\r') {
          state_ = State::kLineFeed;
        } else {
          return fail("invalid character after a quoted chunk extension value");
        }
        break;
      case State::kLineFeed:
        if (c != '\n') return fail("chunk line without CRLF");
        state_ = State::kIdle;
        result = Result::kDone;
        break;
    }
  }
  input.remove_prefix(i);
  return result;
}

}  // namespace ucp::http::detail
