// An L4 (TCP) load balancer: relays every connection to one of several servers.
// Build: part of the normal build (bin/example_tcp_proxy). Try, with two echo servers behind it:
//
//   bin/proactor_test --set server.port=9001 &  bin/proactor_test --set server.port=9002 &
//   bin/example_tcp_proxy 127.0.0.1:8000 "127.0.0.1:9001, 127.0.0.1:9002 weight=2"
//   bin/test_client normal --port 8000
//
// Options (before the two arguments): --balance round_robin|least_conn|hash, --threads N,
// --health tcp|http:/PATH, --send-proxy v1|v2, --accept-proxy, --buffer-size BYTES. Ctrl-C
// stops it gracefully.

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>

#include "ucp/proxy/L4Gateway.h"

namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: example_tcp_proxy [--balance B] [--threads N] [--health H] [--send-proxy v1|v2] "
      "[--accept-proxy] [--buffer-size N] IP:PORT \"HOST:PORT [weight=N], ...\"\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ucp::proxy::L4GatewayOptions options;
  ucp::proxy::UpstreamGroupOptions group;
  group.name = "backend";
  options.proxy.upstream = group.name;
  options.server.read_timeout_ms = 0;  // the relay's idle timeout governs
  int arg = 1;
  for (; arg + 1 < argc && std::string_view(argv[arg]).substr(0, 2) == "--"; arg += 2) {
    const std::string_view flag = argv[arg];
    const std::string_view value = argv[arg + 1];
    if (flag == "--accept-proxy") {
      options.proxy.accept_proxy_protocol = true;
      --arg;  // no value
    } else if (flag == "--balance" && ucp::proxy::parse_balance(value)) {
      group.balance = *ucp::proxy::parse_balance(value);
    } else if (flag == "--buffer-size") {  // each loop's receive buffers: bytes per send
      options.loop.provided_buffer_size = static_cast<uint32_t>(std::stoul(std::string(value)));
    } else if (flag == "--threads") {
      options.server.thread_num = static_cast<uint32_t>(std::stoul(std::string(value)));
    } else if (flag == "--health" && ucp::proxy::parse_health_check(value, group.health)) {
    } else if (flag == "--send-proxy" && ucp::proxy::parse_proxy_protocol(value)) {
      group.proxy_protocol = *ucp::proxy::parse_proxy_protocol(value);
    } else {
      return usage();
    }
  }
  if (argc - arg != 2) return usage();
  const std::string listen = argv[arg];
  const size_t colon = listen.rfind(':');
  auto servers = ucp::proxy::parse_servers(argv[arg + 1]);
  if (colon == std::string::npos || !servers) return usage();
  options.server.ip = listen.substr(0, colon);
  options.server.port = static_cast<uint16_t>(std::stoul(listen.substr(colon + 1)));
  group.servers = std::move(*servers);
  options.upstreams.push_back(group);

  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;  // taken by a waiting thread: stop() is not for signal handlers
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ucp::proxy::L4Gateway gateway(std::move(options));
  if (auto started = gateway.start(); !started) {
    std::fprintf(stderr, "%s\n", started.error().message.c_str());
    return 1;
  }
  std::thread signal_waiter([&gateway, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    gateway.stop();
  });
  std::printf("listening on %s\n", gateway.local_address().to_string().c_str());
  std::fflush(stdout);
  gateway.run();
  signal_waiter.join();
}
