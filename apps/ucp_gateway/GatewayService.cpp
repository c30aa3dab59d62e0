#include "GatewayService.h"

#include <chrono>
#include <mutex>

#include "ucp/io/Operations.h"
#include "ucp/log/Logger.h"
#include "ucp/metrics/Exposition.h"

#include "AdminMetrics.h"

namespace ucp::gateway {
namespace {

proxy::TcpProxyOptions tcp_options(const GatewaySettings& s) {
  proxy::TcpProxyOptions o;
  o.upstream = s.upstream;
  o.accept_proxy_protocol = s.accept_proxy_protocol;
  return o;
}

proxy::HttpProxyOptions http_options(const GatewaySettings& s, const http::HttpOptions& h) {
  proxy::HttpProxyOptions o;
  o.routes = s.routes;
  o.default_upstream = s.upstream;
  o.requests.max_request_line_bytes = h.max_request_line_bytes;
  o.requests.max_header_bytes = h.max_header_bytes;
  o.requests.max_body_bytes = s.max_body_bytes;
  o.requests.header_timeout_ms = h.header_timeout_ms;
  o.requests.keepalive_timeout_ms = h.keepalive_timeout_ms;
  o.requests.body_timeout_ms = h.body_timeout_ms;
  o.send_timeout_ms = h.send_timeout_ms;
  return o;
}

}  // namespace

GatewayService::GatewayService(const GatewaySettings& settings, const ServerOptions& server,
                               const LoopOptions& loop, const http::HttpOptions& http)
    : mode_(settings.mode),
      admin_port_(settings.admin_port),
      shutdown_timeout_ms_(server.shutdown_timeout_ms),
      http_settings_(http) {
  if (mode_ == Mode::kTcp) {
    proxy::L4GatewayOptions o;
    o.server = server;
    o.server.read_timeout_ms = 0;  // the relay's idle timeout governs
    o.loop = loop;
    o.proxy = tcp_options(settings);
    o.upstreams = settings.groups;
    tcp_ = std::make_unique<proxy::L4Gateway>(std::move(o));
    tcp_upstream_ = settings.upstream;
  } else {
    proxy::HttpGatewayOptions o;
    o.server = server;
    o.loop = loop;
    o.proxy = http_options(settings, http);
    o.upstreams = settings.groups;
    http_ = std::make_unique<proxy::HttpGateway>(std::move(o));
  }
  if (admin_port_ != 0) {
    ServerOptions admin = server;
    admin.port = admin_port_;
    admin.thread_num = 1;
    admin.max_connections = 64;
    admin.shutdown_timeout_ms = 500;
    admin.listen.reuse_port = false;
    LoopOptions admin_loop;
    admin_loop.backend = loop.backend;
    admin_loop.ring_entries = 256;
    admin_ = std::make_unique<http::HttpServer>(admin, admin_loop, http::HttpOptions{});
    admin_->router().get("/healthz", [this](http::Request&, http::Response& res) -> Task<> {
      res.set_content_type("text/plain");
      if (draining_.load(std::memory_order_relaxed)) {
        res.set_status(503);
        res.set_body("draining\n");
      } else {
        res.set_body("ok\n");
      }
      co_return;
    });
    admin_->router().get("/metrics",
                         [this](http::Request&, http::Response& res) { return scrape(res); });
  }
}

GatewayService::~GatewayService() { stop_admin(); }

Result<void, Error> GatewayService::start(std::string* warnings) {
  if (auto started = tcp_ ? tcp_->start(warnings) : http_->start(warnings); !started) {
    return started;
  }
  if (admin_) {
    if (auto started = admin_->start(); !started) {
      return Unexpected{Error("admin listener (gateway.admin_port " + std::to_string(admin_port_) +
                                  "): " + started.error().message,
                              started.error().code)};
    }
    admin_loop_ = admin_->tcp().worker_loops().front();
  }
  return {};
}

void GatewayService::run() {
  if (admin_) {
    LOG_INFO("admin: /metrics and /healthz on {}", admin_->local_address().to_string());
    admin_thread_ = std::thread([this] { admin_->run(); });
  }
  if (tcp_) {
    tcp_->run();
  } else {
    http_->run();
  }
  stop_admin();
}

void GatewayService::stop_admin() noexcept {
  if (!admin_thread_.joinable()) return;
  // A scrape visits the gateway's loops: none may be away when the admin's loop stops.
  admin_closing_.store(true);
  for (int i = 0; i < 2000 && scrapes_.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  admin_->stop();
  admin_thread_.join();
}

void GatewayService::stop() noexcept {
  if (stopping_) return;
  stopping_ = true;
  main_loop().spawn(drain_then_stop());
}

void GatewayService::stop_now() noexcept {
  stopping_ = true;
  admin_closing_.store(true);
  if (tcp_) {
    tcp_->stop_now();
  } else {
    http_->stop_now();
  }
}

Task<> GatewayService::drain_then_stop() {
  draining_.store(true);
  LOG_INFO("draining: {} connection(s) open (at most server.shutdown_timeout_ms = {} ms)",
           connection_count(), shutdown_timeout_ms_);
  if (tcp_) {
    tcp_->drain();
  } else {
    http_->drain();
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(shutdown_timeout_ms_);
  while (connection_count() > 0 && std::chrono::steady_clock::now() < deadline) {
    co_await io::sleep_for(main_loop(), std::chrono::milliseconds(10));
  }
  if (tcp_) {
    tcp_->stop();
  } else {
    http_->stop();
  }
}

EventLoop& GatewayService::main_loop() noexcept {
  return tcp_ ? tcp_->server().main_loop() : http_->server().main_loop();
}

std::string GatewayService::listening() const {
  return (tcp_ ? tcp_->local_address() : http_->local_address()).to_string();
}

std::string GatewayService::describe_loops() const {
  return tcp_ ? tcp_->server().describe_loops() : http_->server().describe_loops();
}

size_t GatewayService::connection_count() const noexcept {
  return tcp_ ? tcp_->connection_count() : http_->connection_count();
}

TcpServer* GatewayService::tcp_server() noexcept {
  return tcp_ ? &tcp_->server() : &http_->server();
}

std::optional<uint64_t> GatewayService::requests() const {
  if (!http_) return std::nullopt;
  return http_->proxy().total().requests;
}

Result<void, Error> GatewayService::reconfigure(const GatewaySettings& fresh) {
  if (tcp_) {
    auto done = tcp_->reconfigure(tcp_options(fresh), fresh.groups);
    if (done) {
      std::lock_guard lock(tcp_upstream_mutex_);
      tcp_upstream_ = fresh.upstream;
    }
    return done;
  }
  return http_->reconfigure(http_options(fresh, http_settings_), fresh.groups);
}

Task<> GatewayService::scrape(http::Response& response) {
  if (admin_closing_.load()) {
    response.set_status(503);
    co_return;
  }
  scrapes_.fetch_add(1);
  struct Done {
    std::atomic<int>& count;
    ~Done() { count.fetch_sub(1); }
  } done{scrapes_};
  GatewaySnapshot snapshot;
  snapshot.connections_open = connection_count();
  EventLoop& home = *admin_loop_;
  if (tcp_) {
    snapshot.groups = co_await tcp_->upstreams().collect_stats(home);
    snapshot.tcp = tcp_->proxy().total();
    std::lock_guard lock(tcp_upstream_mutex_);
    snapshot.tcp_upstream = tcp_upstream_;
  } else {
    snapshot.groups = co_await http_->upstreams().collect_stats(home);
    snapshot.http = http_->proxy().total();
    snapshot.http_upstreams = co_await http_->proxy().collect_stats(home);
  }
  response.set_content_type(metrics::kContentType);
  render_metrics(snapshot, response.body_buffer());
}

}  // namespace ucp::gateway
