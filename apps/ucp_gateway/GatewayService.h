#pragma once
// GatewayService: bin/ucp_gateway as the runtime serves it (ucp/app/Service.h): the TCP or HTTP
// gateway of the config's mode, and its admin listener (GET /metrics, /healthz) when
// gateway.admin_port is set.
//
// Graceful stop (SIGTERM, SIGINT): the gateway stops accepting and drains — in http mode every
// answer from then on closes its connection and idle keep-alive connections close at once; in
// tcp mode relayed connections go on — until no connection is left or server.shutdown_timeout_ms
// has passed; then whatever is left is stopped. /healthz answers 503 while it drains, so a
// balancer in front stops sending. The same signal again stops at once.
//
// Thread contract: as Service; reconfigure() from the main loop (the reload hook).

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ucp/app/Service.h"
#include "ucp/http/HttpServer.h"
#include "ucp/proxy/HttpGateway.h"
#include "ucp/proxy/L4Gateway.h"

#include "GatewayConfig.h"

namespace ucp::gateway {

class GatewayService final : public app::Service {
 public:
  GatewayService(const GatewaySettings& settings, const ServerOptions& server,
                 const LoopOptions& loop, const http::HttpOptions& http);
  ~GatewayService() override;

  Result<void, Error> start(std::string* warnings) override;
  void run() override;
  void stop() noexcept override;
  void stop_now() noexcept override;
  EventLoop& main_loop() noexcept override;
  std::string listening() const override;
  std::string describe_loops() const override;
  size_t connection_count() const noexcept override;
  TcpServer* tcp_server() noexcept override;
  std::optional<uint64_t> requests() const override;

  /// SIGHUP: the upstream groups and routes of `fresh` (mode and admin_port take effect at the
  /// next start). An invalid set changes nothing; the error says why.
  Result<void, Error> reconfigure(const GatewaySettings& fresh);

 private:
  Task<> drain_then_stop();
  Task<> scrape(http::Response& response);
  void stop_admin() noexcept;

  Mode mode_;
  uint16_t admin_port_;
  uint32_t shutdown_timeout_ms_;
  http::HttpOptions http_settings_;  // the client side's limits (a reload keeps them)
  std::unique_ptr<proxy::L4Gateway> tcp_;
  std::unique_ptr<proxy::HttpGateway> http_;
  std::unique_ptr<http::HttpServer> admin_;
  EventLoop* admin_loop_ = nullptr;
  std::thread admin_thread_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> admin_closing_{false};
  std::atomic<int> scrapes_{0};    // /metrics answers visiting the gateway's loops
  bool stopping_ = false;          // main loop only
  std::mutex tcp_upstream_mutex_;  // the reload hook writes, a scrape reads
  std::string tcp_upstream_;
};

}  // namespace ucp::gateway
