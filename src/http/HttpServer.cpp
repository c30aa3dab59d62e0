#include "ucp/http/HttpServer.h"

#include <algorithm>
#include <thread>

#include "ucp/io/detail/LoopSlots.h"

#include "ServerCore.h"

namespace ucp::http {

detail::ServerCore::ServerCore(const HttpOptions& http_options, size_t workers)
    : options(http_options),
      limits{http_options.max_request_line_bytes, http_options.max_header_bytes,
             http_options.max_body_bytes},
      slots(std::make_unique<detail::WorkerSlot[]>(workers)),
      slot_count(workers) {}

detail::WorkerSlot* detail::ServerCore::slot_for(const EventLoop& loop) noexcept {
  // Once per connection, not per request; workers number their slots in the order they first
  // serve (one slot per worker, so the shared last slot is never reached).
  return &slots[ucp::detail::claim_loop_slot(slot_count, loop,
                                             [&](size_t i) -> auto& { return slots[i].loop; })];
}

namespace {

size_t worker_count(const ServerOptions& options) {
  return options.thread_num == 0 ? std::max(1u, std::thread::hardware_concurrency())
                                 : options.thread_num;
}

// What a client that sends plain HTTP to the HTTPS port reads before the close (as nginx).
constexpr std::string_view kPlainHttpToHttps =
    "HTTP/1.1 400 Bad Request\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 51\r\n"
    "Connection: close\r\n"
    "\r\n"
    "The plain HTTP request was sent to an HTTPS port.\r\n";

ServerOptions tcp_options(ServerOptions options) {
  // Every read deadline is the HTTP layer's own (header, keep-alive, body, linger).
  options.read_timeout_ms = 0;
  if (options.tls && options.tls_plaintext_reply.empty()) {
    options.tls_plaintext_reply = kPlainHttpToHttps;
  }
  return options;
}

}  // namespace

HttpServer::HttpServer(const ServerOptions& server_options, const LoopOptions& loop_options,
                       const HttpOptions& http_options)
    : core_(std::make_unique<detail::ServerCore>(http_options, worker_count(server_options))) {
  detail::ServerCore* core = core_.get();
  core->tls = server_options.tls != nullptr;
  tcp_ = std::make_unique<TcpServer>(
      tcp_options(server_options), loop_options,
      [core](TcpConnection& connection) { return core->serve(connection); });
}

HttpServer::~HttpServer() = default;

Router& HttpServer::router() noexcept { return core_->router; }
void HttpServer::add_middleware(Middleware middleware) {
  core_->middleware.push_back(std::move(middleware));
}
Result<void, Error> HttpServer::start(std::string* warnings) {
  if (core_->metrics && !core_->metrics->requests) {
    // The routes are final now: one histogram set per route, worker and (method, code) slot.
    const HttpMetricsOptions& o = core_->metrics->options;
    core_->metrics->requests = std::make_unique<detail::RequestMetrics>(
        core_->slot_count, core_->router.routes(), o.duration_bounds, o.pairs_per_route);
    core_->request_metrics = core_->metrics->requests.get();
  }
  return tcp_->start(warnings);
}
void HttpServer::run() { tcp_->run(); }
void HttpServer::stop() noexcept { tcp_->stop(); }
void HttpServer::drain() noexcept {
  core_->draining.store(true, std::memory_order_relaxed);
  tcp_->drain();
}
TcpServer& HttpServer::tcp() noexcept { return *tcp_; }
const InetAddress& HttpServer::local_address() const noexcept { return tcp_->local_address(); }
const HttpOptions& HttpServer::options() const noexcept { return core_->options; }

std::vector<WorkerStats> HttpServer::stats() const {
  std::vector<WorkerStats> all(core_->slot_count);
  constexpr auto relaxed = std::memory_order_relaxed;
  for (size_t i = 0; i < all.size(); ++i) {
    const detail::WorkerSlot& slot = core_->slots[i];
    WorkerStats& s = all[i];
    s.connections_open = slot.connections_open.load(relaxed);
    s.connections_accepted = slot.connections_accepted.load(relaxed);
    for (size_t c = 0; c < 4; ++c) s.responses[c] = slot.responses[c].load(relaxed);
    s.informational = slot.informational.load(relaxed);
    s.bytes_received = slot.bytes_received.load(relaxed);
    s.bytes_sent = slot.bytes_sent.load(relaxed);
  }
  return all;
}

}  // namespace ucp::http
