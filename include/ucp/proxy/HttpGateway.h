#pragma once
// HttpGateway: an HTTP/1.1 reverse proxy server: listen (TcpServer), route each request by host
// and path to an upstream group, pass it to a server over a pooled keep-alive connection
// (HttpProxy), with the groups shared by all workers (Upstreams). The HTTP twin of L4Gateway.
//
//   proxy::HttpGatewayOptions options;
//   options.server.port = 8080;
//   options.proxy.routes = {{"api", "*", "/api/", "api"}};
//   options.proxy.default_upstream = "web";
//   options.upstreams = {api_group, web_group};
//   proxy::HttpGateway gateway(options);
//   if (auto started = gateway.start(); !started) { /* started.error().message, exit 1 */ }
//   gateway.run();                                    // until stop()
//
// reconfigure() (the binary's SIGHUP) replaces the groups and the routes at run time without
// dropping established connections; an invalid set changes nothing.
//
// Thread contract: construct, start and run on one thread; stop(), stop_now() and
// reconfigure() from any thread.

#include <string>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/TcpServer.h"
#include "ucp/proxy/HttpProxy.h"
#include "ucp/proxy/L4Gateway.h"
#include "ucp/proxy/UpstreamConfig.h"
#include "ucp/proxy/Upstreams.h"

namespace ucp::proxy {

struct HttpGatewayOptions {
  ServerOptions server;
  /// The workers' loops: receive buffers of kRelayBufferSize, as the L4 relay's, since bodies
  /// pass through them piece by piece in both directions.
  LoopOptions loop = [] {
    LoopOptions o;
    o.provided_buffers_count = defaults::kProvidedBuffersCount;
    o.provided_buffer_size = kRelayBufferSize;
    return o;
  }();
  HttpProxyOptions proxy;
  std::vector<UpstreamGroupOptions> upstreams;
  Resolver* resolver = nullptr;  // null: Resolver::shared()
};

class HttpGateway {
 public:
  explicit HttpGateway(HttpGatewayOptions options);
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;
  ~HttpGateway();

  /// Validates the groups and routes (every route, and the default, must name a group),
  /// listens, starts the workers and the upstreams' control thread. The error is one line.
  Result<void, Error> start(std::string* warnings = nullptr);
  /// Serves until stop(); the upstreams' control thread ends with it.
  void run();
  void stop() noexcept { server_.stop(); }
  void stop_now() noexcept { server_.stop_now(); }
  /// Graceful stop's first step, from any thread: stop accepting, end each client connection
  /// after its request in progress (idle ones at once). stop() ends what is left.
  void drain() noexcept {
    server_.drain();
    proxy_.drain();
  }
  size_t connection_count() const noexcept { return server_.connection_count(); }
  /// Replaces the groups, routes and options (validated first: an invalid set changes nothing
  /// and the error says why). New requests use the new set; those in flight finish as they began.
  Result<void, Error> reconfigure(HttpProxyOptions proxy,
                                  std::vector<UpstreamGroupOptions> upstreams);
  /// What reconfigure() and start() check.
  static Result<void, Error> check(const HttpProxyOptions& proxy,
                                   const std::vector<UpstreamGroupOptions>& upstreams);

  const InetAddress& local_address() const noexcept { return server_.local_address(); }
  TcpServer& server() noexcept { return server_; }
  HttpProxy& proxy() noexcept { return proxy_; }
  Upstreams& upstreams() noexcept { return upstreams_; }

 private:
  HttpGatewayOptions options_;
  // Destroyed after the server: the workers' connections hold state of both.
  Upstreams upstreams_;
  HttpProxy proxy_;
  TcpServer server_;
};

}  // namespace ucp::proxy
