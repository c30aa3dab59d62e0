#pragma once
// TcpProxy: the L4 (TCP) proxy as a TcpServer handler. For each client connection: read a PROXY
// header if the proxy sits behind a balancer that sends one, pick a server of the upstream group
// and connect (connect_upstream: retries on another server, passive health), send a PROXY
// header to it if the group asks, then relay() until both directions end.
//
//   proxy::Upstreams upstreams;
//   proxy::TcpProxy proxy({.upstream = "app"}, upstreams);
//   TcpServer server(server_options, loop_options, proxy.handler());
//   server.start();
//   upstreams.start(server.worker_loops(), groups);
//   proxy.attach(server.worker_loops());
//   server.run();
//
// (L4Gateway does exactly this.) A client whose connection gets no server (none available,
// every connect failed, a refused PROXY header) is closed at once.
//
// Counters are per worker, written by that worker alone (relaxed atomics written with plain
// stores: no lock prefix on the data path) and readable from any thread with stats().
//
// Thread contract: attach() on the owning thread before the workers serve; serve() on the
// workers; reconfigure() and stats() from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/net/TcpServer.h"
#include "ucp/proxy/Relay.h"
#include "ucp/proxy/UpstreamConnector.h"
#include "ucp/proxy/Upstreams.h"

namespace ucp::proxy {

struct TcpProxyOptions {
  std::string upstream;  // the group client connections are relayed to
  /// Expect a PROXY protocol header (v1 or v2) first on every client connection (behind a
  /// balancer that sends one); a connection without a valid one is closed.
  bool accept_proxy_protocol = false;
  uint32_t proxy_header_timeout_ms = defaults::kProxyHeaderTimeoutMs;
};

/// One worker's counts (cumulative, except `active`).
struct TcpProxyStats {
  uint64_t connections = 0;           // client connections taken
  uint64_t active = 0;                // being served now
  uint64_t relayed = 0;               // reached an upstream server
  uint64_t no_server = 0;             // closed: no server available, or every connect failed
  uint64_t proxy_header_refused = 0;  // closed: no valid PROXY header in time
  uint64_t resets = 0;                // relays ended by a reset (passed on to the other side)
  uint64_t timeouts = 0;              // relays ended by the idle or total timeout
  uint64_t errors = 0;                // relays ended by another error
  uint64_t client_to_upstream_bytes = 0;
  uint64_t upstream_to_client_bytes = 0;
};

class TcpProxy {
 public:
  TcpProxy(TcpProxyOptions options, Upstreams& upstreams);
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  ~TcpProxy();

  /// Sets up each worker's state; the workers must be those of `upstreams`.
  Result<void, Error> attach(const std::vector<EventLoop*>& workers);
  /// Serves one client connection (the TcpServer handler).
  Task<> serve(TcpConnection& client);
  TcpServer::Handler handler() {
    return [this](TcpConnection& client) { return serve(client); };
  }
  /// New client connections use `options` from now on; established ones go on as they are.
  void reconfigure(TcpProxyOptions options);
  /// The same change, as a step of Upstreams::reconfigure: each worker takes the new options in
  /// the task that installs the new groups, so that no connection sees one without the other
  /// (new options naming a group the worker does not have yet).
  Upstreams::WorkerUpdate reconfigure_with_upstreams(TcpProxyOptions options);
  /// Per worker, in the order attach() got them.
  std::vector<TcpProxyStats> stats() const;
  /// The workers' counts summed.
  TcpProxyStats total() const;

 private:
  struct Worker;
  /// A client connection ready to be relayed.
  struct Prepared {
    UpstreamConnection upstream;
    BufferLease first;   // client bytes that came with its PROXY header
    InetAddress client;  // from the PROXY header, else the connection's peer
    RelayOptions relay;
  };
  Worker* worker_for(EventLoop& loop) const noexcept;
  Task<std::optional<Prepared>> prepare(Worker& worker, TcpConnection& client);

  TcpProxyOptions options_;  // until attach(); then each worker's copy
  Upstreams& upstreams_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace ucp::proxy
