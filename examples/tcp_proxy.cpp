// An L4 (TCP) load balancer: relays every connection to one of several servers. It runs on the
// application runtime (a Service around proxy::L4Gateway): a config file or --set, --help,
// signals (Ctrl-C stops it gracefully), the "listening on" line and the exit codes. Try, with
// two echo servers behind it:
//
//   bin/proactor_test --set server.port=9001 &  bin/proactor_test --set server.port=9002 &
//   bin/example_tcp_proxy --set proxy.servers="127.0.0.1:9001, 127.0.0.1:9002 weight=2"
//   bin/test_client normal --port 8000
//
// Its [proxy] keys: servers, balance (round_robin | least_conn | hash), health (none | tcp |
// http:/PATH), send_proxy (off | v1 | v2), accept_proxy, buffer_size; --help lists them.

#include <string>

#include "ucp/app/Application.h"
#include "ucp/app/Service.h"
#include "ucp/proxy/L4Gateway.h"

namespace {

/// The gateway as the runtime serves it.
class Gateway final : public ucp::app::Service {
 public:
  explicit Gateway(ucp::proxy::L4GatewayOptions options) : gateway_(std::move(options)) {}
  ucp::Result<void, ucp::Error> start(std::string* warnings) override {
    auto started = gateway_.start(warnings);
    if (started) loops_ = gateway_.server().describe_loops();
    return started;
  }
  void run() override { gateway_.run(); }
  void stop() noexcept override { gateway_.stop(); }
  void stop_now() noexcept override { gateway_.stop_now(); }
  ucp::EventLoop& main_loop() noexcept override { return gateway_.server().main_loop(); }
  std::string listening() const override { return gateway_.local_address().to_string(); }
  std::string describe_loops() const override { return loops_; }
  ucp::TcpServer* tcp_server() noexcept override { return &gateway_.server(); }

 private:
  ucp::proxy::L4Gateway gateway_;
  std::string loops_;  // after start()
};

// A key's value checked by one of the proxy layer's parsers: "" or what is wrong.
template <class Parse>
auto checked_by(Parse parse) {
  return [parse](std::string_view value) -> std::string {
    auto parsed = parse(value);
    return parsed ? std::string() : parsed.error().message;
  };
}

}  // namespace

int main(int argc, char** argv) {
  ucp::app::Application app("example_tcp_proxy");
  auto& proxy = app.schema().section("proxy", "what the gateway relays to");
  proxy.text("servers", "", "HOST:PORT [weight=N], ...")
      .required()
      .check(checked_by(ucp::proxy::parse_servers));
  proxy
      .choice("balance", "round_robin", {"round_robin", "least_conn", "hash"},
              "how a server is "
              "chosen")
      .noun("a balance");
  proxy.text("health", "none", "none | tcp | http:/PATH").check([](std::string_view value) {
    ucp::proxy::HealthCheckOptions health;
    auto parsed = ucp::proxy::parse_health_check(value, health);
    return parsed ? std::string() : parsed.error().message;
  });
  proxy.choice("send_proxy", "off", {"off", "v1", "v2"}, "PROXY protocol to the servers");
  proxy.flag("accept_proxy", false, "expect a PROXY protocol header from a balancer in front");
  proxy.size("buffer_size", ucp::proxy::kRelayBufferSize, 1024, 1 << 20,
             "bytes relayed per send (each loop's receive buffers)");
  // The relay's idle timeout governs, not a read timeout.
  app.schema().set_defaults({"server.port=8000", "server.read_timeout_ms=0", "log.file="});
  app.adjust_loop_options([](const ucp::app::Config& config, ucp::LoopOptions& loop) {
    loop.provided_buffer_size = config.get<uint32_t>("proxy.buffer_size");  // one send each
  });
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;

  const ucp::app::Config& config = app.config();
  ucp::proxy::L4GatewayOptions options;
  options.server = app.server_options();
  options.loop = app.loop_options();
  options.proxy.accept_proxy_protocol = config.get<bool>("proxy.accept_proxy");
  ucp::proxy::UpstreamGroupOptions group;
  group.name = "backend";
  group.servers = *ucp::proxy::parse_servers(config.get<std::string>("proxy.servers"));
  group.balance = *ucp::proxy::parse_balance(config.get<std::string>("proxy.balance"));
  (void)ucp::proxy::parse_health_check(config.get<std::string>("proxy.health"), group.health);
  group.proxy_protocol =
      *ucp::proxy::parse_proxy_protocol(config.get<std::string>("proxy.send_proxy"));
  options.proxy.upstream = group.name;
  options.upstreams.push_back(std::move(group));
  Gateway gateway(std::move(options));
  return app.serve(gateway, "tcp proxy");
}
