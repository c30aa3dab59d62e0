// L4Gateway in-process, on each backend, in front of in-process echo servers that count their
// connections: how each balance spreads connections, a refused connect retried on the next
// server, every server refusing, passive and active health taking a server out and bringing it
// back, half-close and reset through the gateway, and a reconfiguration that leaves established
// connections alone.

#include "ucp/proxy/L4Gateway.h"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "Backends.h"
#include "ErrorText.h"
#include "LoopbackClient.h"

namespace ucp::proxy {
namespace {

using namespace std::chrono_literals;
using test::Deadline;

/// An echo server on its own thread that counts the connections it accepts.
class CountingEchoServer {
 public:
  explicit CountingEchoServer(BackendKind backend, uint16_t port = 0) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = port;
    options.thread_num = 1;
    options.read_timeout_ms = 0;
    options.shutdown_timeout_ms = 1000;
    LoopOptions loop;
    loop.backend = backend;
    loop.ring_entries = 256;
    server_ = std::make_unique<TcpServer>(options, loop, [this](TcpConnection& c) {
      accepted_.fetch_add(1);
      return echo(c);
    });
    error_ = test::error_text(server_->start());
    if (!error_.empty()) return;
    port_ = server_->local_address().port();
    thread_ = std::thread([this] { server_->run(); });
  }
  CountingEchoServer(const CountingEchoServer&) = delete;
  CountingEchoServer& operator=(const CountingEchoServer&) = delete;
  ~CountingEchoServer() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    server_->stop_now();
    thread_.join();
  }
  bool started() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  static Task<> echo(TcpConnection& connection) {
    for (;;) {
      auto data = co_await connection.receive();
      if (!data || data->empty()) co_return;
      if (!co_await connection.write_all(data->bytes())) co_return;
    }
  }

  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
  std::string error_;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
};

/// The gateway on its own thread.
class Gateway {
 public:
  explicit Gateway(L4GatewayOptions options) : gateway_(std::move(options)) {
    error_ = test::error_text(gateway_.start());
    if (error_.empty()) thread_ = std::thread([this] { gateway_.run(); });
  }
  ~Gateway() {
    if (thread_.joinable()) {
      gateway_.stop_now();
      thread_.join();
    }
  }
  bool started() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return gateway_.local_address().port(); }
  L4Gateway& operator*() { return gateway_; }
  L4Gateway* operator->() { return &gateway_; }

 private:
  L4Gateway gateway_;
  std::thread thread_;
  std::string error_;
};

L4GatewayOptions gateway_options(BackendKind backend, UpstreamGroupOptions group,
                                 uint32_t threads = 1) {
  L4GatewayOptions options;
  options.server.ip = "127.0.0.1";
  options.server.port = 0;
  options.server.thread_num = threads;
  options.server.shutdown_timeout_ms = 1000;
  options.loop.backend = backend;
  options.loop.ring_entries = 512;
  options.loop.provided_buffers_count = 256;
  group.name = "app";
  options.proxy.upstream = "app";
  options.upstreams.push_back(std::move(group));
  return options;
}

ServerSpec at(uint16_t port, uint32_t weight = 1) { return {"127.0.0.1", port, weight}; }

UpstreamGroupOptions servers_of(std::vector<ServerSpec> servers,
                                Balance balance = Balance::kRoundRobin) {
  UpstreamGroupOptions group;
  group.servers = std::move(servers);
  group.balance = balance;
  return group;
}

/// A port nothing listens on (bound and released).
uint16_t closed_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

/// Connects to the gateway from `source_ip` (any 127/8 address works on loopback).
Result<UniqueFd> connect_from(const std::string& source_ip, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in source{};
  source.sin_family = AF_INET;
  ::inet_pton(AF_INET, source_ip.c_str(), &source.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) {
    return Unexpected{test::last_error()};
  }
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(port);
  target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
    return Unexpected{test::last_error()};
  }
  ::fcntl(fd.get(), F_SETFL, O_NONBLOCK);
  return fd;
}

/// One echo round trip on `fd`.
bool round_trip(int fd, const std::string& message = "ping through the gateway") {
  std::string scratch(message.size(), '\0');
  return static_cast<bool>(test::echo_round_trip(fd, message, scratch));
}

/// A connection through the gateway that has made one round trip (so it reached a server).
UniqueFd relayed(uint16_t port, const std::string& source_ip = "127.0.0.1") {
  auto fd = connect_from(source_ip, port);
  EXPECT_TRUE(fd) << fd.error().message();
  if (!fd) return UniqueFd();
  EXPECT_TRUE(round_trip(fd->get()));
  return std::move(*fd);
}

/// What a client sees next: "eof", "reset", "data" or an error's text.
std::string next_event(int fd, int64_t timeout_ms = 10000) {
  char byte;
  auto n = test::recv_some(fd, std::span(&byte, 1), timeout_ms);
  if (!n) return n.error() == std::errc::connection_reset ? "reset" : n.error().message();
  return *n == 0 ? "eof" : "data";
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

class L4GatewayTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
  BackendKind backend() const { return GetParam(); }
};

#define START_OR_FAIL(server) ASSERT_TRUE((server).started()) << (server).error()

TEST_P(L4GatewayTest, RoundRobinGivesEachServerItsWeightOnEveryWorker) {
  CountingEchoServer a(backend()), b(backend()), c(backend());
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  START_OR_FAIL(c);
  Gateway gateway(gateway_options(
      backend(), servers_of({at(a.port(), 1), at(b.port(), 2), at(c.port(), 3)}), 2));
  START_OR_FAIL(gateway);
  // 60 connections, handed to the two workers in turn: each worker's smooth round robin gives
  // 1:2:3 over its 30, so the servers see exactly 10, 20 and 30.
  for (int i = 0; i < 60; ++i) relayed(gateway.port());
  EXPECT_TRUE(eventually([&] { return a.accepted() + b.accepted() + c.accepted() == 60; }));
  EXPECT_EQ(a.accepted(), 10);
  EXPECT_EQ(b.accepted(), 20);
  EXPECT_EQ(c.accepted(), 30);
  EXPECT_EQ(gateway->proxy().total().relayed, 60u);
}

TEST_P(L4GatewayTest, LeastConnSendsNewConnectionsToTheLeastBusyServer) {
  CountingEchoServer a(backend()), b(backend()), c(backend());
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  START_OR_FAIL(c);
  Gateway gateway(gateway_options(
      backend(), servers_of({at(a.port()), at(b.port()), at(c.port())}, Balance::kLeastConn)));
  START_OR_FAIL(gateway);
  std::vector<UniqueFd> open;
  for (int i = 0; i < 6; ++i) open.push_back(relayed(gateway.port()));
  EXPECT_EQ(a.accepted(), 2);
  EXPECT_EQ(b.accepted(), 2);
  EXPECT_EQ(c.accepted(), 2);
  // The connections that went to a and b end; the next four go to a and b, none to c.
  const int c_before = c.accepted();
  open.clear();  // all end; the gateway sees the FINs
  std::vector<UniqueFd> held;
  for (int i = 0; i < 3; ++i) held.push_back(relayed(gateway.port()));  // one on each
  EXPECT_TRUE(eventually([&] { return gateway->proxy().total().active == 3; }));
  held.erase(held.begin());  // one server idle again: the next goes there
  EXPECT_TRUE(eventually([&] { return gateway->proxy().total().active == 2; }));
  const int a0 = a.accepted(), b0 = b.accepted(), c0 = c.accepted();
  held.push_back(relayed(gateway.port()));
  EXPECT_EQ((a.accepted() - a0) + (b.accepted() - b0) + (c.accepted() - c0), 1);
  EXPECT_GE(c.accepted(), c_before);
}

TEST_P(L4GatewayTest, HashKeepsEachClientAddressOnOneServer) {
  CountingEchoServer a(backend()), b(backend()), c(backend());
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  START_OR_FAIL(c);
  Gateway gateway(gateway_options(
      backend(), servers_of({at(a.port()), at(b.port()), at(c.port())}, Balance::kHash)));
  START_OR_FAIL(gateway);
  std::array<CountingEchoServer*, 3> servers = {&a, &b, &c};
  std::map<int, int> clients_per_server;
  for (int ip = 2; ip < 32; ++ip) {
    const std::string source = "127.0.0." + std::to_string(ip);
    std::array<int, 3> before = {a.accepted(), b.accepted(), c.accepted()};
    for (int i = 0; i < 3; ++i) relayed(gateway.port(), source);  // three connections, one IP
    int servers_used = 0;
    for (int s = 0; s < 3; ++s) {
      const int got = servers[s]->accepted() - before[s];
      if (got == 0) continue;
      ++servers_used;
      EXPECT_EQ(got, 3) << source << " was spread over servers";
      ++clients_per_server[s];
    }
    EXPECT_EQ(servers_used, 1) << source;
  }
  EXPECT_EQ(clients_per_server.size(), 3u) << "30 client addresses all hashed to fewer servers";
}

TEST_P(L4GatewayTest, ARefusedConnectIsRetriedOnTheNextServer) {
  CountingEchoServer live(backend());
  START_OR_FAIL(live);
  UpstreamGroupOptions group = servers_of({at(closed_port()), at(live.port())});
  group.max_fails = 0;  // no ejection: every connection meets the refusing server again
  Gateway gateway(gateway_options(backend(), group));
  START_OR_FAIL(gateway);
  for (int i = 0; i < 10; ++i) relayed(gateway.port());
  EXPECT_EQ(live.accepted(), 10);
  EXPECT_EQ(gateway->proxy().total().relayed, 10u);
  EXPECT_EQ(gateway->proxy().total().no_server, 0u);
}

TEST_P(L4GatewayTest, EveryServerRefusingClosesTheClientAfterBoundedTries) {
  UpstreamGroupOptions group =
      servers_of({at(closed_port()), at(closed_port()), at(closed_port())});
  group.max_fails = 0;
  group.connect_tries = 2;
  Gateway gateway(gateway_options(backend(), group));
  START_OR_FAIL(gateway);
  for (int i = 0; i < 5; ++i) {
    auto fd = test::connect_loopback(gateway.port());
    ASSERT_TRUE(fd);
    (void)test::send_text(fd->get(), "anyone?");
    const std::string event = next_event(fd->get());
    EXPECT_TRUE(event == "eof" || event == "reset") << event;
  }
  EXPECT_TRUE(eventually([&] { return gateway->proxy().total().no_server == 5; }));
}

TEST_P(L4GatewayTest, PassiveEjectionTakesARefusingServerOutUntilItAnswersAgain) {
  CountingEchoServer live(backend());
  START_OR_FAIL(live);
  const uint16_t later = closed_port();
  UpstreamGroupOptions group = servers_of({at(later), at(live.port())});
  group.max_fails = 2;
  group.fail_timeout_ms = 300;
  Gateway gateway(gateway_options(backend(), group));
  START_OR_FAIL(gateway);
  for (int i = 0; i < 6; ++i) relayed(gateway.port());
  EXPECT_EQ(live.accepted(), 6);  // the refusing one was tried twice, then skipped
  CountingEchoServer back(backend(), later);
  START_OR_FAIL(back);
  // After fail_timeout_ms it is tried again, connects, and takes its turns.
  EXPECT_TRUE(eventually([&] {
    relayed(gateway.port());
    return back.accepted() > 0;
  }));
  const int before = back.accepted();
  for (int i = 0; i < 10; ++i) relayed(gateway.port());
  EXPECT_EQ(back.accepted() - before, 5);  // round robin again
}

TEST_P(L4GatewayTest, ActiveHealthChecksTakeADeadServerOutAndBringItBack) {
  CountingEchoServer steady(backend());
  START_OR_FAIL(steady);
  auto flaky = std::make_unique<CountingEchoServer>(backend());
  START_OR_FAIL(*flaky);
  const uint16_t flaky_port = flaky->port();
  UpstreamGroupOptions group = servers_of({at(flaky_port), at(steady.port())});
  group.max_fails = 0;  // only the checks decide
  group.health.kind = HealthCheckKind::kTcp;
  group.health.interval_ms = 50;
  group.health.fall = 2;
  group.health.rise = 2;
  Gateway gateway(gateway_options(backend(), group));
  START_OR_FAIL(gateway);
  flaky->stop();
  flaky.reset();
  // Down after two failed checks: every connection goes to the steady server, none is refused.
  auto down = [&] {
    std::atomic<bool> result{false};
    return eventually([&] {
      const int before = steady.accepted();
      for (int i = 0; i < 4; ++i) relayed(gateway.port());
      return steady.accepted() - before == 4;
    });
  };
  EXPECT_TRUE(down());
  CountingEchoServer again(backend(), flaky_port);
  START_OR_FAIL(again);
  EXPECT_TRUE(eventually([&] {
    relayed(gateway.port());
    return again.accepted() > 0;
  }));
}

TEST_P(L4GatewayTest, HalfCloseAndResetPassThrough) {
  // A raw upstream: the test plays the server's side too.
  auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), {});
  ASSERT_TRUE(listener);
  const uint16_t port = InetAddress::local_of(listener->get())->port();
  Gateway gateway(gateway_options(backend(), servers_of({at(port)})));
  START_OR_FAIL(gateway);
  auto accept_server_side = [&] {
    pollfd p{listener->get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1);
    return UniqueFd(::accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  };
  {  // the client half-closes after its request; the response still arrives
    auto client = test::connect_loopback(gateway.port());
    ASSERT_TRUE(client);
    UniqueFd server = accept_server_side();
    ASSERT_TRUE(test::send_text(client->get(), "request"));
    ::shutdown(client->get(), SHUT_WR);
    char request[7];
    ASSERT_TRUE(test::recv_exact(server.get(), request));
    EXPECT_EQ(next_event(server.get()), "eof");
    ASSERT_TRUE(test::send_text(server.get(), "response"));
    ::shutdown(server.get(), SHUT_WR);
    char response[8];
    ASSERT_TRUE(test::recv_exact(client->get(), response));
    EXPECT_EQ(std::string(response, 8), "response");
    EXPECT_EQ(next_event(client->get()), "eof");
  }
  {  // the server half-closes first; the client can still send
    auto client = test::connect_loopback(gateway.port());
    ASSERT_TRUE(client);
    UniqueFd server = accept_server_side();
    ::shutdown(server.get(), SHUT_WR);
    EXPECT_EQ(next_event(client->get()), "eof");
    ASSERT_TRUE(test::send_text(client->get(), "late"));
    char late[4];
    ASSERT_TRUE(test::recv_exact(server.get(), late));
    EXPECT_EQ(std::string(late, 4), "late");
  }
  {  // a client's reset reaches the server as a reset
    auto client = test::connect_loopback(gateway.port());
    ASSERT_TRUE(client);
    UniqueFd server = accept_server_side();
    ASSERT_TRUE(test::send_text(client->get(), "x"));
    char x;
    ASSERT_TRUE(test::recv_exact(server.get(), std::span(&x, 1)));
    test::set_reset_on_close(client->get());
    client->reset();
    EXPECT_EQ(next_event(server.get()), "reset");
  }
  {  // and a server's reset reaches the client as one
    auto client = test::connect_loopback(gateway.port());
    ASSERT_TRUE(client);
    UniqueFd server = accept_server_side();
    ASSERT_TRUE(test::send_text(server.get(), "y"));
    char y;
    ASSERT_TRUE(test::recv_exact(client->get(), std::span(&y, 1)));
    test::set_reset_on_close(server.get());
    server.reset();
    EXPECT_EQ(next_event(client->get()), "reset");
  }
  EXPECT_TRUE(eventually([&] { return gateway->proxy().total().resets == 2; }));
}

TEST_P(L4GatewayTest, ReconfigureKeepsEstablishedConnections) {
  CountingEchoServer old_server(backend()), new_server(backend());
  START_OR_FAIL(old_server);
  START_OR_FAIL(new_server);
  auto options = gateway_options(backend(), servers_of({at(old_server.port())}));
  Gateway gateway(options);
  START_OR_FAIL(gateway);
  UniqueFd established = relayed(gateway.port());
  EXPECT_EQ(old_server.accepted(), 1);

  // An invalid set is refused and changes nothing.
  auto bad = options.upstreams;
  bad[0].servers.clear();
  EXPECT_FALSE(gateway->reconfigure(options.proxy, bad));
  auto wrong_name = options.proxy;
  wrong_name.upstream = "nothing";
  EXPECT_FALSE(gateway->reconfigure(wrong_name, options.upstreams));

  // Another group under another name, and the proxy pointed at it.
  UpstreamGroupOptions next = servers_of({at(new_server.port())});
  next.name = "next";
  TcpProxyOptions proxy = options.proxy;
  proxy.upstream = "next";
  ASSERT_TRUE(gateway->reconfigure(proxy, {next}));
  // The change reaches the worker a moment later; from then on every new connection goes to
  // the new group.
  EXPECT_TRUE(eventually([&] {
    relayed(gateway.port());
    return new_server.accepted() > 0;
  }));
  const int old_before = old_server.accepted();
  for (int i = 0; i < 5; ++i) relayed(gateway.port());
  EXPECT_EQ(old_server.accepted(), old_before);
  // The connection made before the change still relays, to its old server.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(round_trip(established.get()));
}

INSTANTIATE_TEST_SUITE_P(Backends, L4GatewayTest, test::kAllBackends, test::backend_name);

}  // namespace
}  // namespace ucp::proxy
