#pragma once
// L4Gateway: a TCP proxy server: listen (TcpServer), pick a server of the upstream group,
// connect, relay (TcpProxy), with the group shared by all workers (Upstreams).
//
//   proxy::L4GatewayOptions options;
//   options.server.port = 8000;
//   options.proxy.upstream = "app";
//   options.upstreams.push_back({.name = "app", .servers =
//   *proxy::parse_servers("10.0.0.7:80, 10.0.0.8:80")}); proxy::L4Gateway gateway(options); if
//   (auto started = gateway.start(); !started) { /* started.error().message, exit 1 */ }
//   gateway.run();                                    // until stop()
//
// reconfigure() (the binary's SIGHUP) replaces the groups and the proxy options at run time
// without dropping established connections; an invalid set changes nothing.
//
// Thread contract: construct, start and run on one thread; stop(), stop_now() and reconfigure()
// from any thread.

#include <string>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/TcpServer.h"
#include "ucp/proxy/TcpProxy.h"
#include "ucp/proxy/UpstreamConfig.h"
#include "ucp/proxy/Upstreams.h"

namespace ucp::proxy {

/// A relay sends what one receive buffer holds per send: 16 KiB halves the CPU per byte of a
/// bulk stream against 4 KiB (as HAProxy's and nginx's 16 KiB buffers do), costs a pingpong
/// nothing, and an idle connection holds no buffer whatever the size. Memory is mapped per
/// loop and committed as buffers are used.
inline constexpr uint32_t kRelayBufferSize = 16384;

struct L4GatewayOptions {
  ServerOptions server;
  /// The workers' loops. Receive buffers are what makes the relay copy-free (a multishot
  /// receive lends them, and the relay sends from them): each loop gets the binaries' count,
  /// of kRelayBufferSize bytes, since each one is one send when bytes stream through.
  LoopOptions loop = [] {
    LoopOptions o;
    o.provided_buffers_count = defaults::kProvidedBuffersCount;
    o.provided_buffer_size = kRelayBufferSize;
    return o;
  }();
  TcpProxyOptions proxy;
  std::vector<UpstreamGroupOptions> upstreams;
  Resolver* resolver = nullptr;  // null: Resolver::shared()
};

class L4Gateway {
 public:
  explicit L4Gateway(L4GatewayOptions options);
  L4Gateway(const L4Gateway&) = delete;
  L4Gateway& operator=(const L4Gateway&) = delete;
  ~L4Gateway();

  /// Validates the groups (proxy.upstream must name one), listens, starts the workers and the
  /// upstreams' control thread. The error is one line, as TcpServer::start's.
  Result<void, Error> start(std::string* warnings = nullptr);
  /// Serves until stop(); the upstreams' control thread ends with it.
  void run();
  void stop() noexcept { server_.stop(); }
  void stop_now() noexcept { server_.stop_now(); }
  /// Graceful stop's first step, from any thread: stop accepting; relayed connections go on
  /// until they end. stop() ends what is left.
  void drain() noexcept { server_.drain(); }
  size_t connection_count() const noexcept { return server_.connection_count(); }
  /// Replaces the groups and the proxy options (validated first: an invalid set changes
  /// nothing and the error says why). New connections use the new set; established ones go on.
  Result<void, Error> reconfigure(TcpProxyOptions proxy,
                                  std::vector<UpstreamGroupOptions> upstreams);

  const InetAddress& local_address() const noexcept { return server_.local_address(); }
  TcpServer& server() noexcept { return server_; }
  TcpProxy& proxy() noexcept { return proxy_; }
  Upstreams& upstreams() noexcept { return upstreams_; }

 private:
  static Result<void, Error> check(const TcpProxyOptions& proxy,
                                   const std::vector<UpstreamGroupOptions>& upstreams);

  L4GatewayOptions options_;
  // Destroyed after the server: the workers' connections hold state of both.
  Upstreams upstreams_;
  TcpProxy proxy_;
  TcpServer server_;
};

}  // namespace ucp::proxy
