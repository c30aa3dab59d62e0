#pragma once
// RequestReader: reads HTTP/1.1 requests from a server connection head first, then the body
// piece by piece as it arrives, for programs that pass requests on rather than answer them
// (the gateway's HTTP mode): nothing of a body is held, whatever its size. Parsing, limits
// and refusals are HttpServer's own (llhttp in strict mode and the RFC 9112 checks on top of
// it: docs/http.md lists what is refused and why), so a message that could be framed two ways
// never gets through.
//
//   http::RequestReader reader(connection, options);
//   for (;;) {
//     auto status = co_await reader.next();       // the next request's head
//     if (status == RequestReader::Status::kClosed) break;     // EOF, idle, the connection failed
//     if (status == RequestReader::Status::kRefused) { answer reader.error_status(); close; }
//     http::Request& request = reader.request();  // method, target, headers (body() empty)
//     while (auto piece = co_await reader.read_body()) {
//       if (piece->empty()) break;                // the body has ended (trailers())
//       forward(*piece);                          // a view, valid until the next read_body()
//     }
//   }
//
// Timeouts (a deadline on each receive): keepalive_timeout_ms for the first byte of a request
// (header_timeout_ms before the first one), header_timeout_ms from that byte to the end of the
// head (408: kRefused), body_timeout_ms for each wait for body bytes (timed_out).
//
// Thread contract: the connection's loop thread only. The connection must outlive the reader.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ucp/base/Result.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/http/ClientSession.h"
#include "ucp/http/Request.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/Timer.h"
#include "ucp/net/TcpConnection.h"

namespace ucp::http {

struct RequestReaderOptions {
  uint32_t max_request_line_bytes = 8192;  // beyond: 414
  uint32_t max_header_bytes = 16384;       // header fields (and trailers): 431
  uint64_t max_body_bytes = 0;             // 0 = no bound; beyond: 413
  uint32_t header_timeout_ms = 10000;      // first byte of a request to the end of its head: 408
  uint32_t keepalive_timeout_ms = 75000;   // idle between requests, then kClosed (0 = none)
  uint32_t body_timeout_ms = 60000;        // each wait for body bytes (0 = none)
};

namespace detail {
class RequestParser;
}

class RequestReader {
 public:
  enum class Status : uint8_t {
    kRequest,  // request() holds the next request's head
    kClosed,   // the client closed, went idle too long, or the connection failed: nothing to answer
    kRefused,  // a malformed or oversized request: answer error_status() and close
  };

  RequestReader(TcpConnection& connection, const RequestReaderOptions& options);
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;
  ~RequestReader();

  /// Reads up to the end of the next request's head. The previous request's body must have
  /// been read to its end. `stop` ends the wait with kClosed while no byte of a request has
  /// come (a draining server closing its idle keep-alive connections); a head already begun is
  /// read on.
  Task<Status> next(StopToken stop = {});
  /// The head of the request next() returned (strings valid until the next next()).
  Request& request() noexcept;
  /// How its body is framed: kNone, kLength (content_length()) or kChunked.
  BodyFraming body_framing() const noexcept { return framing_; }
  uint64_t content_length() const noexcept { return content_length_; }
  /// After kRefused, or a read_body() refused: the status to answer (400, 408, 413, 414, 431,
  /// 501, 505) and why.
  int error_status() const noexcept { return error_status_; }
  std::string_view error_reason() const noexcept { return error_reason_; }

  /// The client sent "Expect: 100-continue" and waits for it before its body: say it (or
  /// answer the request without reading the body) before read_body().
  bool expects_continue() const noexcept;
  void continue_sent() noexcept;

  /// The next piece of the body (a view valid until the next call), empty once it has ended.
  /// Errors: timed_out (body_timeout_ms), protocol_error (a refused chunk or a body above
  /// max_body_bytes: error_status() says which), connection_aborted (the client closed in the
  /// middle), or the connection's own error.
  Task<Result<std::string_view>> read_body();
  /// The trailers of a chunked body, once it has ended.
  std::span<const Header> trailers() const noexcept;
  /// The body has been read to its end (or there was none).
  bool body_complete() const noexcept { return body_complete_; }

  /// Bytes received after the current request (the first bytes of another protocol after a
  /// 101, or pipelined requests): taken out of the reader, which reads no more.
  BufferLease take_unread() noexcept;
  /// Requests whose heads next() returned.
  uint64_t requests() const noexcept { return requests_; }

 private:
  Result<void> refuse(int status, std::string_view reason) noexcept;
  /// The end of a receive into lease_ (awaited in next() and read_body() themselves, no frame
  /// of its own): pending_ views the bytes; an empty pending_ after success means EOF.
  Result<void> received(Result<size_t> received) noexcept;

  TcpConnection& connection_;
  RequestReaderOptions options_;
  std::unique_ptr<detail::RequestParser> parser_;
  BufferLease lease_;
  std::string_view pending_;  // received and not yet parsed: a view into lease_
  BodyFraming framing_ = BodyFraming::kNone;
  uint64_t content_length_ = 0;
  uint64_t requests_ = 0;
  int error_status_ = 0;
  std::string_view error_reason_;
  bool in_request_ = false;  // a head was returned and its end not yet reached
  bool body_complete_ = true;
  bool eof_ = false;
};

}  // namespace ucp::http
