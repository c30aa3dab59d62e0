#pragma once
// ResponseEncoder: the bytes of a response head (status line and header fields), written
// into a buffer that lives in the connection's pooled state, so encoding allocates nothing
// unless a head outgrows it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "ucp/http/Request.h"

namespace ucp::http::detail {

/// A byte buffer with inline room for a typical head plus a small body; it spills to the
/// heap only beyond that.
class OutBuffer {
 public:
  static constexpr size_t kInlineBytes = 1024;

  void clear() noexcept {
    size_ = 0;
    spill_.clear();
    spilled_ = false;
  }
  std::string_view view() const noexcept {
    return spilled_ ? std::string_view(spill_) : std::string_view(inline_, size_);
  }
  size_t size() const noexcept { return spilled_ ? spill_.size() : size_; }
  /// Bytes that still fit without spilling.
  size_t inline_room() const noexcept { return spilled_ ? 0 : kInlineBytes - size_; }
  void append(std::string_view text) {
    if (!spilled_ && text.size() <= kInlineBytes - size_) {  // the common case, inlined
      if (!text.empty()) std::memcpy(inline_ + size_, text.data(), text.size());
      size_ += text.size();
      return;
    }
    append_spilling(text);
  }
  void append_decimal(uint64_t value);
  void append_hex(uint64_t value);

 private:
  void append_spilling(std::string_view text);

  char inline_[kInlineBytes];
  size_t size_ = 0;
  std::string spill_;
  bool spilled_ = false;
};

/// How the body of a response is delimited.
enum class Framing : uint8_t {
  kNone,        // no body: 1xx, 204, 304 (a HEAD answer keeps the GET's framing)
  kLength,      // Content-Length
  kChunked,     // Transfer-Encoding: chunked
  kUntilClose,  // a stream to an HTTP/1.0 client: the close ends it
};

struct HeadFields {
  int status = 200;
  std::span<const Header> headers = {};
  bool custom_date = false;    // the handler set Date
  bool custom_server = false;  // the handler set Server
  Framing framing = Framing::kNone;
  uint64_t content_length = 0;  // for kLength
  bool keep_alive = true;
  bool upgrade = false;               // a 101 that switches protocols: "Connection: Upgrade"
  int version_minor = 1;              // of the request: HTTP/1.0 keep-alive is said explicitly
  std::string_view server_name = {};  // "" = no Server header
  std::string_view date = {};         // the Date value
};

/// Appends "HTTP/1.1 <status> <reason>\r\n", the fields and the empty line to `out`.
void encode_head(const HeadFields& head, OutBuffer& out);

/// A status the server can send: three digits. Anything else is sent as 500.
constexpr bool valid_status(int status) noexcept { return status >= 100 && status <= 999; }

/// reason_phrase(status) and a newline ("Not Found\n"), static text: the body of the answers
/// the server makes itself and of Response::reply(); "" for a code without a phrase.
std::string_view reason_line(int status) noexcept;

}  // namespace ucp::http::detail
