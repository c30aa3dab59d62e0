#pragma once
// Response: what a handler answers. Three kinds of body:
//
//   response.set_body("Hello, World!");          // borrowed: static text or request bytes
//   response.body_buffer() = render(page);       // owned by the response
//   response.set_file(std::move(fd), 0, size);   // a file, sent without reading it whole
//
// or a stream, written while the handler runs (chunked when the length is unknown):
//
//   for (auto& row : rows) {
//     if (!co_await response.write(row)) co_return;  // the peer left, or stopped reading
//   }
//
// The server adds Date, Server, Content-Length or Transfer-Encoding, and Connection itself,
// omits the body for HEAD and for 1xx/204/304, and sends the response after the handler
// returns (a stream: its head with the first write()). Stream writes go through the
// connection's bounded output queue: a write waits while the peer is behind, so a stream
// costs at most server.max_output_bytes of memory, and a peer that takes nothing for
// http.send_timeout_ms ends the connection.
//
// A handler may also switch the connection to another protocol (WebSocket: ucp/ws/Accept.h):
//
//   response.add_header("Upgrade", "websocket");
//   response.switch_protocols([](TcpConnection& conn, BufferLease& received) -> Task<> {
//     ...  // the connection is this coroutine's until it returns
//   });
//
// Header names and values are copied into the response (a small inline arena first, so
// the usual few headers cost no allocation). Nothing here throws: a header that cannot be
// added is refused with `false`. Thread contract: the connection's loop thread.

#include <cstddef>
#include <cstdint>
#include <forward_list>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/http/Request.h"
#include "ucp/io/BufferLease.h"

namespace ucp {
class TcpConnection;
}

namespace ucp::http {

namespace detail {
class Connection;
}

/// What takes a connection over after a 101 (Switching Protocols) answer: it runs on the
/// connection's loop, reads and writes it for the rest of its life, and the server closes the
/// connection when it returns. `received` holds the bytes that followed the request in the
/// same read (usually none: a client waits for the 101); take them (move) or drop them. It
/// stays valid until the handler returns (until its first suspension with
/// UpgradeKeep::kUntilStarted).
using UpgradeHandler = UniqueFunction<Task<>(TcpConnection& connection, BufferLease& received)>;

/// How long the server keeps the UpgradeHandler object (its captures) and `received`.
enum class UpgradeKeep : uint8_t {
  kUntilReturn,   // until the handler's coroutine returns: it may refer to them throughout
  kUntilStarted,  // until it first suspends (or returns): it has taken what it needs from them
                  // (or points to what outlives the connection), and an idle connection then
                  // holds neither
};

class Response {
 public:
  static constexpr size_t kMaxHeaders = 32;

  enum class BodyKind : uint8_t { kNone, kBorrowed, kOwned, kFile, kStream };

  Response() = default;
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;

  void set_status(int status) noexcept { status_ = status; }
  int status() const noexcept { return status_; }

  /// Adds a header field (copied). Refused, returning false with nothing added: a name that
  /// is not a token, a value with CR, LF or NUL (response splitting), more than kMaxHeaders
  /// fields, no memory for the copy. The server writes Content-Length, Transfer-Encoding and
  /// Connection itself: those given here are ignored (true), except "Connection: close",
  /// which closes the connection after this response. A Date or Server given here replaces
  /// the server's own.
  bool add_header(std::string_view name, std::string_view value) noexcept;
  /// Replaces the value of the header named `name` (every field of that name goes, one
  /// takes its place), or adds it; false as add_header().
  bool set_header(std::string_view name, std::string_view value) noexcept;
  /// Removes every header named `name` (ASCII case-insensitive); how many went.
  size_t remove_header(std::string_view name) noexcept;
  /// Adds `field` to the Vary header (created if absent) unless it lists it already: a
  /// response chosen by that request header (Origin, Accept-Encoding) says so to caches.
  bool add_vary(std::string_view field) noexcept;
  /// set_header("Content-Type", type).
  bool set_content_type(std::string_view type) noexcept { return set_header("Content-Type", type); }
  std::span<const Header> headers() const noexcept { return {fields(), header_count_}; }
  /// The value of the first header named `name` that was added, or "".
  std::string_view header(std::string_view name) const noexcept;

  // One-call answers: status, Content-Type and an owned body in one statement.
  //
  //   co_return res.text("pong\n");
  //   co_return res.reply(404);                      // 404, "Not Found\n"
  //   co_return res.redirect("/login", 303);
  //
  // JSON: ucp/http/Json.h (http::json(res, value)); a file with its validators, conditional
  // requests and ranges: ucp/http/StaticFiles.h (http::send_file).

  /// `status` with `body` as text/plain; charset=utf-8.
  void text(std::string body, int status = 200) noexcept;
  /// `status` with `body` as text/html; charset=utf-8.
  void html(std::string body, int status = 200) noexcept;
  /// `status` with `body` and `content_type`.
  void content(std::string body, std::string_view content_type, int status = 200) noexcept;
  /// A redirect (301, 302, 303, 307 or 308; any other status becomes 302) to `location`,
  /// which is sent as given (a URL or a path: encode what came from a request,
  /// ucp/http/Url.h), with a short text body. A location with CR, LF or NUL is refused:
  /// the answer is then a 500.
  void redirect(std::string_view location, int status = 302) noexcept;
  /// `status` with its reason phrase as a text/plain body ("Not Found\n"); for a status
  /// without a body (204, 304) no body.
  void reply(int status) noexcept;

  /// A body in memory the response does not own: it must stay valid until the handler has
  /// returned and the response is sent (static text, or bytes of the request).
  void set_body(std::string_view bytes) noexcept;
  /// A body the response owns; fill the string (the kind becomes kOwned).
  std::string& body_buffer() noexcept;
  /// A file body: `length` bytes of `file` from `offset`. The server reads it through the
  /// ring in bounded pieces and closes it when done.
  void set_file(UniqueFd file, uint64_t offset, uint64_t length) noexcept;
  BodyKind body_kind() const noexcept { return body_kind_; }
  /// The body as bytes (borrowed or owned kinds; empty otherwise).
  std::string_view body() const noexcept;
  uint64_t file_offset() const noexcept { return file_offset_; }
  uint64_t file_length() const noexcept { return file_length_; }

  /// Streaming: the first call sends the head, then each call sends `bytes` (as one chunk
  /// when the length is unknown). Waits while the connection's output queue is full.
  /// Errors: the connection failed or closed (the handler should return), or
  /// message_size for writing past a set_content_length(). To HEAD requests the head is
  /// sent and the bytes are dropped.
  [[nodiscard]] Task<Result<void>> write(std::string_view bytes);
  /// For a stream of known length, before the first write(): sent as Content-Length
  /// instead of chunked encoding.
  void set_content_length(uint64_t length) noexcept { stream_length_ = length; }
  /// The body bytes write() has sent so far.
  uint64_t bytes_streamed() const noexcept { return stream_sent_; }
  /// The head has gone out (a stream has started): status and headers are fixed.
  bool head_sent() const noexcept { return head_sent_; }
  /// "Connection: close" was added.
  bool close_requested() const noexcept { return close_; }

  /// Switches protocols after this response: the status becomes 101 and, once the handler
  /// (and the middleware around it) has returned, the server sends the head with
  /// "Connection: Upgrade", stops reading requests, and runs `handler` on the connection. Add
  /// the Upgrade header and what the new protocol needs. Should the status be changed from
  /// 101 afterwards (a middleware's own answer), the response is an ordinary one and
  /// `handler` is dropped; a 101 without a handler is answered as a 500. `keep` says how long
  /// the server keeps `handler` (the object) and `received` once the handler runs.
  void switch_protocols(UpgradeHandler handler,
                        UpgradeKeep keep = UpgradeKeep::kUntilReturn) noexcept;
  bool switching_protocols() const noexcept { return static_cast<bool>(upgrade_); }

  /// Back to a fresh 200 with no headers and no body (the server reuses one per request).
  void reset() noexcept;

 private:
  friend class detail::Connection;
  /// `text` copied into the arena (or an overflow node); nullopt without memory.
  std::optional<std::string_view> copy(std::string_view text) noexcept;

  static constexpr size_t kArenaBytes = 768;
  static constexpr uint64_t kUnknownLength = ~uint64_t{0};
  int status_ = 200;
  BodyKind body_kind_ = BodyKind::kNone;
  bool close_ = false;
  bool custom_date_ = false;
  bool custom_server_ = false;
  bool head_sent_ = false;
  UpgradeKeep upgrade_keep_ = UpgradeKeep::kUntilReturn;
  uint32_t header_count_ = 0;
  size_t arena_used_ = 0;
  std::string_view borrowed_;
  std::string owned_;
  UniqueFd file_;
  uint64_t file_offset_ = 0;
  uint64_t file_length_ = 0;
  uint64_t stream_length_ = kUnknownLength;
  uint64_t stream_sent_ = 0;
  detail::Connection* connection_ = nullptr;  // set by the server for write()
  UpgradeHandler upgrade_;                    // switch_protocols()
  std::forward_list<std::string> overflow_;   // header text beyond the arena
  char arena_[kArenaBytes];
  alignas(Header) std::byte field_storage_[sizeof(Header) * kMaxHeaders];  // as in Request

  const Header* fields() const noexcept {
    return std::launder(reinterpret_cast<const Header*>(field_storage_));
  }
  Header* fields() noexcept { return std::launder(reinterpret_cast<Header*>(field_storage_)); }
};

}  // namespace ucp::http
