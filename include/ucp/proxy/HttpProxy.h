#pragma once
// HttpProxy: the HTTP/1.1 reverse proxy as a TcpServer handler. For each request of a client
// connection: read its head (http::RequestReader: the HTTP layer's parser, limits and
// smuggling defences), route it by host and path to an upstream group (RouteTable), take a
// pooled keep-alive connection to a server the group's balance picks or connect one, pass the
// head on rewritten (hop-by-hop fields dropped, X-Forwarded-For, X-Forwarded-Proto and
// Forwarded added), stream the body to the server and the response back, piece by piece from
// the loop's receive buffers (nothing held whole, no copy), and keep both connections for the
// next request when both sides allow it.
//
//   proxy::Upstreams upstreams;
//   proxy::HttpProxy proxy(options, upstreams);         // routes, default group, client limits
//   TcpServer server(server_options, loop_options, proxy.handler());
//   server.start();
//   upstreams.start(server.worker_loops(), groups);
//   proxy.attach(server.worker_loops());
//   server.run();
//
// (HttpGateway does exactly this.) What a client gets when the gateway cannot pass a request
// on: 404 when no route matches and there is no default group; 503 when every server of the
// group is ejected or failing its health checks; 502 when no server answered (every connect
// tried failed, or the answer was malformed or cut short); 504 when a server took longer than
// the group's idle_timeout_ms to answer (or to connect). A response cut short after its head
// was sent resets the client's connection. "Upgrade: websocket" requests are passed on, and a
// 101 answer turns the two connections into a relay (relay()) until either side ends.
//
// Thread contract: attach() on the owning thread before the workers serve; serve() on the
// workers; reconfigure_with_upstreams(), stats() and collect_stats() as their comments say.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/http/RequestReader.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/net/TcpServer.h"
#include "ucp/proxy/HttpRoutes.h"
#include "ucp/proxy/Upstreams.h"

namespace ucp::proxy {

struct HttpProxyOptions {
  std::vector<HttpRoute> routes;
  /// The group for requests no route matches; empty: those get 404.
  std::string default_upstream;
  /// The client side: limits (no bound on bodies by default: they are streamed) and timeouts.
  http::RequestReaderOptions requests;
  /// A client that takes no byte of its response this long is dropped (0 = never).
  uint32_t send_timeout_ms = 60000;
  /// After a response that closes the connection with the client's request unread: how long
  /// the gateway keeps reading (and dropping) so that its answer is not reset away.
  uint32_t linger_timeout_ms = 2000;
};

/// Per upstream group, summed over the workers (collect_stats).
struct HttpUpstreamStats {
  std::string upstream;
  uint64_t requests = 0;            // requests sent to one of its servers
  uint64_t responses[5] = {};       // its servers' answers by class: 1xx (101) .. 5xx
  uint64_t no_server = 0;           // 503: every server ejected or down
  uint64_t connect_errors = 0;      // connects that failed (each server tried)
  uint64_t bad_gateway = 0;         // 502: no server answered, or a malformed or cut answer
  uint64_t gateway_timeouts = 0;    // 504
  uint64_t connections_made = 0;    // new upstream connections
  uint64_t connections_reused = 0;  // requests that went on a pooled keep-alive connection
  uint64_t pool_idle = 0;           // idle pooled connections now
  uint64_t active = 0;              // requests in flight now
};

/// The gateway's own counts, per worker (any thread).
struct HttpProxyStats {
  uint64_t connections = 0;  // client connections taken
  uint64_t requests = 0;     // requests read
  uint64_t not_found = 0;    // 404: no route, no default group
  uint64_t refused = 0;      // malformed or oversized requests (400, 408, 413, 414, 431...)
  uint64_t upgrades = 0;     // WebSocket upgrades relayed
};

class HttpProxy {
 public:
  HttpProxy(HttpProxyOptions options, Upstreams& upstreams);
  HttpProxy(const HttpProxy&) = delete;
  HttpProxy& operator=(const HttpProxy&) = delete;
  ~HttpProxy();

  /// The routes must name groups (validated by HttpGateway). Sets up each worker's state; the
  /// workers must be those of `upstreams`.
  Result<void, Error> attach(const std::vector<EventLoop*>& workers);
  /// Serves one client connection (the TcpServer handler).
  Task<> serve(TcpConnection& client);
  TcpServer::Handler handler() {
    return [this](TcpConnection& client) { return serve(client); };
  }
  /// A step of Upstreams::reconfigure: each worker takes the new routes and options in the
  /// task that installs the new groups (a route never names a group its worker lacks), and
  /// drops the pools of groups that are gone. Requests in flight finish as they began.
  Upstreams::WorkerUpdate reconfigure_with_upstreams(HttpProxyOptions options);

  /// Graceful stop, from any thread: every answer from now on ends its connection
  /// (Connection: close), and client connections waiting for a request are closed at once; a
  /// request in progress finishes. (The server stops accepting on its own: TcpServer::drain.)
  void drain() noexcept;

  /// Per worker, in the order attach() got them (any thread).
  std::vector<HttpProxyStats> stats() const;
  HttpProxyStats total() const;
  /// Every group's counts summed over the workers: visits each worker's loop in turn and comes
  /// back to `home` (the loop that awaits it), as Upstreams::collect_stats.
  Task<std::vector<HttpUpstreamStats>> collect_stats(EventLoop& home);

 private:
  struct Settings;
  struct Worker;
  struct Group;
  struct Exchange;
  struct IdleWait;
  struct Scratch;
  Worker* worker_for(EventLoop& loop) const noexcept;
  /// Where a request goes: its group (status 0), or the status the gateway answers itself
  /// (400, 404, 503).
  struct Route {
    int status = 0;
    const std::string* upstream = nullptr;  // the group's name, in the settings' routes
    GroupRef group{};
  };
  static Route route(Worker& worker, const Settings& settings, const http::Request& request);
  /// The gateway's own answer to a request; whether the connection stays.
  static Task<bool> answer(TcpConnection& client, http::RequestReader& reader, Worker& worker,
                           const Settings& settings, int status);
  /// The request to a server of its group and the answer back (HttpExchange.cpp). False: the
  /// client connection ends.
  Task<bool> forward(Worker& worker, Exchange& exchange);

  HttpProxyOptions options_;  // until attach(); then each worker's copy
  Upstreams& upstreams_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace ucp::proxy
