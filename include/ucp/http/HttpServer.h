#pragma once
// HttpServer: HTTP/1.1 on TcpServer. One coroutine per connection parses requests with
// llhttp (strict), answers them in order through a router and a middleware chain, and keeps
// the connection alive, all on the connection's worker loop:
//
//   ucp::http::HttpServer server(server_options, loop_options, http_options);
//   server.router().get("/hello/{name}", [](Request& req, Response& res) -> ucp::Task<> {
//     res.set_content_type("text/plain");
//     res.body_buffer() = "Hello, " + std::string(req.param("name")) + "!\n";
//     co_return;
//   });
//   server.use(ucp::http::access_log());
//   if (auto started = server.start(); !started) { /* started.error().message; exit 1 */ }
//   server.run();  // until stop()
//
// What the server does for every connection (docs/http.md has the whole list): RFC 9112
// framing with llhttp in strict mode plus the checks llhttp leaves to its caller;
// pipelined requests answered in order (all answers to one read leave in one send);
// Content-Length and chunked request bodies, Expect: 100-continue, HEAD; Date and Server
// headers; 400 and close for ambiguous framing; 414/431/413 past the limits; 408 when a
// request head outlives header_timeout_ms; idle keep-alive connections closed after
// keepalive_timeout_ms; after an error response a lingering close, so the client reads it.
//
// Memory: an idle keep-alive connection holds only its coroutine frames; the request and
// response state comes from the loop's pool while a request is being handled.
//
// Thread contract: construct, configure (router, use) and start on one thread, which then
// runs the main loop in run(); stop() and stats() from any thread. Handlers and middleware
// run on worker threads, concurrently.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/coro/Task.h"
#include "ucp/http/AccessLog.h"
#include "ucp/http/Middleware.h"
#include "ucp/http/Request.h"
#include "ucp/http/Response.h"
#include "ucp/http/Router.h"
#include "ucp/net/TcpServer.h"

namespace ucp::http {

struct HttpOptions {
  uint32_t max_request_line_bytes = defaults::kMaxRequestLineBytes;  // beyond: 414
  uint32_t max_header_bytes = defaults::kMaxHeaderBytes;  // fields after the request line: 431
  uint64_t max_body_bytes = defaults::kMaxBodyBytes;      // request body: 413
  uint32_t header_timeout_ms =
      defaults::kHeaderTimeoutMs;  // first byte of a request to the end of its head:
                                   // 408 (0 = none); also a new connection's wait
                                   // for its first byte (then closed silently)
  uint32_t keepalive_timeout_ms =
      defaults::kKeepaliveTimeoutMs;  // idle between requests, then closed (0 = none)
  uint32_t body_timeout_ms = 5000;    // each read of a request body: 408 (0 = none)
  uint32_t send_timeout_ms =
      defaults::kSendTimeoutMs;       // a write that makes no progress: closed (0 = none)
  uint32_t linger_timeout_ms = 5000;  // after an error: read and drop at most this long
  std::string server_name = "ucp";    // Server header; empty = none
};

namespace detail {
struct ServerCore;
}  // namespace detail

/// Per-worker counters (a snapshot; each worker writes only its own, without locks).
struct WorkerStats {
  uint64_t connections_open = 0;
  uint64_t connections_accepted = 0;
  uint64_t responses[4] = {};  // by status class: 2xx, 3xx, 4xx, 5xx
  /// 1xx answers that end the exchange: 101 Switching Protocols (a 100 Continue is not
  /// counted, its request's final answer is).
  uint64_t informational = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
};

class HttpServer {
 public:
  HttpServer(const ServerOptions& server_options, const LoopOptions& loop_options,
             const HttpOptions& http_options);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  /// Routes; add them before start().
  Router& router() noexcept;
  /// Appends a middleware to the chain (first added runs outermost); before start().
  void use(Middleware middleware);

  /// See TcpServer::start: the Error says in one line what failed and what to do.
  Result<void, Error> start(std::string* warnings = nullptr);
  void run();
  void stop() noexcept;
  /// Any thread, after start(): TcpServer::drain (stop accepting; another process may accept
  /// on the same sockets), and every answer from now on carries Connection: close, so that
  /// each keep-alive client moves to a new connection after its next request instead of
  /// racing a close. stop() ends what is left (idle connections) later.
  void drain() noexcept;

  TcpServer& tcp() noexcept;
  const InetAddress& local_address() const noexcept;
  const HttpOptions& options() const noexcept;
  /// One entry per worker loop. Any thread.
  std::vector<WorkerStats> stats() const;

 private:
  std::unique_ptr<detail::ServerCore> core_;
  std::unique_ptr<TcpServer> tcp_;
};

}  // namespace ucp::http
