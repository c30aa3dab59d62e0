#pragma once
// ClientSession: one HTTP/1.1 connection to a server, used for one request at a time: the
// client side of the protocol, under http::Client and the gateway's HTTP mode. It writes a
// request head and streams its body (Content-Length or chunked), then reads the response head
// and streams its body, parsed by llhttp in strict mode as the server parses requests.
//
//   ClientSession session(std::move(tcp));           // a connected ClientConnection
//   std::string head;
//   append_request_head(head, "POST", "/upload", headers, BodyFraming::kChunked);
//   co_await session.send_head(head, BodyFraming::kChunked);
//   co_await session.send_body(piece);               // as many as there are
//   co_await session.end_body();
//   auto response = co_await session.read_head(30000);   // timed_out after 30 s of silence
//   while (auto piece = co_await session.read_body(30000)) {
//     if (piece->empty()) break;                     // the body has ended
//     use(*piece);                                   // valid until the next read_body()
//   }
//   if (session.reusable()) pool.give(key, std::move(session_ptr));   // keep-alive
//
// Nothing of a body is held whole: a piece is a view into the buffer the loop lent for the
// receive (no copy), the request body goes out from the caller's memory. Only the response
// head is copied, into memory bounded by SessionLimits::max_head_bytes.
//
// What is refused (ClientErrc::kMalformedResponse), so that an ambiguous message is never
// taken for another: a status line other than HTTP/1.x, Content-Length together with
// Transfer-Encoding, duplicate or malformed Content-Length, Transfer-Encoding other than
// exactly "chunked", bad chunk sizes and chunk lines, bare CR or LF, obs-fold, bytes that
// arrive before a request asked for them. Interim 1xx answers (100 Continue, 103 Early Hints)
// are skipped; a 101 ends HTTP on the connection (take_received() has what followed it).
//
// Errors are values: timed_out (no byte for the timeout), ClientErrc::kClosed (the server
// closed or reset before the response ended), the connection's own errors. After any error
// the session is not reusable.
//
// Thread contract: the connection's loop thread only.

#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/http/Request.h"
#include "ucp/io/BufferLease.h"
#include "ucp/net/TcpClient.h"

namespace ucp::http {

enum class ClientErrc : int {
  kClosed = 1,         // the server closed the connection before the response was complete
  kMalformedResponse,  // not a valid HTTP/1.1 response (see above)
  kResponseTooLarge,   // a response head above SessionLimits::max_head_bytes
  kBodyTooLarge,       // a body above what the caller accepts (Client::read_all)
  kBadUrl,             // not "http[s]://host[:port][/path][?query]"
  kUnsupportedScheme,  // neither http:// nor https://
  kTooManyRedirects,   // more than ClientOptions::max_redirects in a row
  kBadHeader,          // a header name that is not a token, or a value with CR, LF or NUL
  kBodyLength,         // a request body that does not match its Content-Length
};
const std::error_category& client_category() noexcept;
inline std::error_code make_error_code(ClientErrc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

/// How a message's body is delimited.
enum class BodyFraming : uint8_t {
  kNone,        // no body
  kLength,      // Content-Length
  kChunked,     // Transfer-Encoding: chunked
  kUntilClose,  // a response without either: its end is the connection's end (not reusable)
};

/// A response's status line and header fields. The strings are views into the session's copy
/// of the head: valid until the session's next request.
struct ResponseHead {
  int status = 0;
  int version_minor = 1;
  std::string_view reason;
  std::vector<Header> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;  // BodyFraming::kLength
  bool keep_alive = true;       // the server keeps the connection open after this response

  /// The first field named `name` (ASCII case-insensitive), or "".
  std::string_view header(std::string_view name) const noexcept;
};

struct SessionLimits {
  uint32_t max_head_bytes = 65536;  // status line and fields of one response (and its trailers)
  uint32_t max_headers = 100;       // fields in a response head (and in its trailers)
};

namespace detail {
class ResponseParser;
}

/// One HTTP/1.1 connection to a server (see above). Owns the connection. Move-only through a
/// unique_ptr (the parser keeps a pointer to it).
class ClientSession {
 public:
  explicit ClientSession(ClientConnection connection, SessionLimits limits = {});
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;
  ~ClientSession();

  TcpConnection& connection() noexcept { return *connection_; }

  /// Starts a request: `head` is its encoded head (append_request_head), whose framing and
  /// length are given again here; `head_request`: a HEAD (its response has no body whatever
  /// its head says). With no body the head is sent from `head` (keep it until this returns);
  /// otherwise it is queued and goes out with the first piece of the body.
  class SendHead;
  SendHead send_head(std::string_view head, BodyFraming framing, uint64_t length = 0,
                     bool head_request = false);
  /// Sends a piece of the body (as one chunk when chunked), from the caller's memory.
  Task<Result<void>> send_body(std::string_view bytes);
  /// Ends the body: the last chunk with `trailers`, or a check that Content-Length was met.
  Task<Result<void>> end_body(std::span<const Header> trailers = {});

  /// Waits for the response head, skipping interim 1xx answers. `timeout_ms` bounds each wait
  /// for bytes (0 = none).
  Task<Result<const ResponseHead*>> read_head(uint32_t timeout_ms);
  /// The head read_head() returned last.
  const ResponseHead& response_head() const noexcept;
  /// The next piece of the body (a view valid until the next call); empty once it has ended.
  Task<Result<std::string_view>> read_body(uint32_t timeout_ms);
  /// read_body() when its answer is already here (the piece or the end received, or an
  /// error): without a wait, nor a coroutine frame. Empty when bytes must be waited for: call
  /// read_body() then.
  std::optional<Result<std::string_view>> try_read_body() noexcept;
  /// The response's trailer fields, once its body has ended (views valid until the next
  /// request).
  std::span<const Header> trailers() const noexcept;
  /// After a 101 answer: the bytes that came after its head (the new protocol's first).
  BufferLease take_received() noexcept;

  /// The last response ended completely, keep-alive, with nothing after it: the connection
  /// can carry another request.
  bool reusable() const noexcept;
  /// A byte of the current response has arrived.
  bool response_started() const noexcept { return response_started_; }
  /// Bytes received and not parsed yet: after read_head(), body bytes that read_body() returns
  /// without waiting (a body of Content-Length N is all here when this is at least N).
  size_t buffered() const noexcept { return pending_.size(); }
  /// Requests sent on this connection so far.
  uint64_t requests() const noexcept { return requests_; }
  /// Closes the connection (flushing what is queued). Idempotent.
  Task<> close();

 private:
  /// The end of a receive into lease_ (read_head() and read_body() await it in their own
  /// frame): pending_ views the bytes; an empty pending_ after success means the server
  /// closed. A failure is the session's (kClosed for a reset).
  Result<void> received(Result<size_t> received) noexcept;
  /// The parser's next body event on pending_, or empty when it needs more bytes.
  std::optional<Result<std::string_view>> next_body_event() noexcept;
  Result<void> fail(std::error_code error) noexcept;
  Result<void> fail_send(std::error_code error) noexcept;

  ClientConnection connection_;
  std::unique_ptr<detail::ResponseParser> parser_;
  BufferLease lease_;
  std::string_view pending_;  // received and not yet parsed: a view into lease_
  BodyFraming request_framing_ = BodyFraming::kNone;
  uint64_t request_length_ = 0;  // kLength: announced
  uint64_t request_sent_ = 0;    // body bytes sent
  uint64_t requests_ = 0;
  bool request_complete_ = true;
  bool response_started_ = false;
  bool response_complete_ = true;
  bool eof_ = false;
  bool failed_ = false;       // the connection is unusable
  bool send_failed_ = false;  // the request could not be sent whole (a response may still come)
};

/// What send_head() returns, to co_await at once: the connection's own write, awaited in the
/// caller's frame (one coroutine frame less per request than a Task).
class [[nodiscard]] ClientSession::SendHead {
 public:
  SendHead(const SendHead&) = delete;
  SendHead& operator=(const SendHead&) = delete;
  ~SendHead() {
    if (started_) write_.~WriteAwaiter();
  }
  bool await_ready() noexcept { return !started_ || write_.await_ready(); }
  void await_suspend(std::coroutine_handle<> caller) noexcept { write_.await_suspend(caller); }
  Result<void> await_resume() noexcept {
    if (!started_) return session_.fail(refused_);
    if (auto sent = write_.await_resume(); !sent) return session_.fail_send(sent.error());
    return {};
  }

 private:
  friend class ClientSession;
  SendHead(ClientSession& session, std::error_code refused) noexcept
      : session_(session), refused_(refused) {}
  // `queue`: copied into the output queue (it leaves with the body's first piece).
  SendHead(ClientSession& session, std::string_view head, bool queue) noexcept
      : session_(session),
        write_(queue ? session.connection_->write(head) : session.connection_->write_all(head)),
        started_(true) {}

  ClientSession& session_;
  std::error_code refused_;
  union {
    TcpConnection::WriteAwaiter write_;  // when started_
  };
  bool started_ = false;
};

/// Appends "METHOD TARGET HTTP/1.1\r\n", `headers`, the framing field (Content-Length: N or
/// Transfer-Encoding: chunked) and the empty line to `out`. The caller's headers carry Host and
/// no framing field of their own. Refuses (kBadHeader, `out` unchanged) a method or field name
/// that is not a token, a target or value with CR, LF, NUL or (target) a space.
Result<void> append_request_head(std::string& out, std::string_view method, std::string_view target,
                                 std::span<const Header> headers, BodyFraming framing,
                                 uint64_t length = 0);

}  // namespace ucp::http

template <>
struct std::is_error_code_enum<ucp::http::ClientErrc> : std::true_type {};
