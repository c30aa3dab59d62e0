// Memory an idle connection keeps, through the public API over loopback: N connections each
// make one round trip and stay open, and the worker's pool (MemoryPool::thread_stats, read on
// the worker thread by a probe on a connection opened before them) may grow by at most a
// budget per connection. Coroutine frames, the connection, its reader and writer all live in
// that pool, so a frame that grows past its size class shows here as a failure, not as a
// surprise in the next idle-memory measurement (scripts/idle-memory.sh measures the whole
// process). Release builds only: sanitizers enlarge every frame.

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>

#include "ucp/http/HttpServer.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/TcpServer.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/WebSocket.h"

#include "Backends.h"
#include "ErrorText.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "WsRawClient.h"

namespace ucp {
namespace {

constexpr std::string_view kProbe = "pool?";

// Bytes of pool memory per idle connection the product promises to stay within (one round
// trip made; README "Memory per idle connection"). Measured: see the test output.
constexpr size_t kEchoBudget = 1152;
constexpr size_t kHttpBudget = 1280;
constexpr size_t kWebSocketBudget = 1664;

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Room for `connections` client and server fds in this one process; how many fit.
size_t raise_fd_limit(size_t connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, 2 * connections + 256);
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = wanted;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  }
  return std::min(connections, static_cast<size_t>((limit.rlim_cur - 256) / 2));
}

size_t parse_size(std::string_view text) {
  size_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// Runs a started server on a thread of its own until the end of the scope.
template <class Server>
class Running {
 public:
  explicit Running(Server& server) : server_(server), thread_([&server] { server.run(); }) {}
  ~Running() {
    server_.stop();
    thread_.join();
  }

 private:
  Server& server_;
  std::thread thread_;
};

ServerOptions one_worker() {
  ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = 0;
  options.thread_num = 1;
  options.read_timeout_ms = 0;
  options.shutdown_timeout_ms = 3000;
  return options;
}

// As the server binaries run: receives land in the loop's receive buffers (multishot), so an
// idle connection holds none.
LoopOptions loop_under_test() {
  LoopOptions loop;
  loop.backend = test::backend_under_test();
  loop.provided_buffers_count = defaults::kProvidedBuffersCount;
  return loop;
}

// Answers a probe with the worker's pool bytes in use; a coroutine of its own, so that its
// string and write are not part of the echo's frame.
Task<bool> report_pool(TcpConnection& connection) {
  const std::string report = std::to_string(MemoryPool::thread_stats().bytes_in_use) + "\n";
  co_return static_cast<bool>(co_await connection.write_all(std::as_bytes(std::span(report))));
}

// The echo of proactor_test (receive() lends a loop buffer, write_all() sends it back), and
// the probe.
Task<> echo_or_report(TcpConnection& connection) {
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;
    const auto bytes = data->bytes();
    const bool probe = bytes.size() == kProbe.size() &&
                       std::memcmp(bytes.data(), kProbe.data(), bytes.size()) == 0;
    if (probe ? !co_await report_pool(connection) : !co_await connection.write_all(bytes)) {
      co_return;
    }
  }
}

// The pool bytes the echo server's worker reports on `probe`.
size_t echo_probe(int probe) {
  if (!test::send_text(probe, kProbe)) return 0;
  std::string reply;
  const test::Deadline deadline(10000);
  char buffer[64];
  while (reply.find('\n') == std::string::npos && !deadline.expired()) {
    const ssize_t n = ::recv(probe, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      reply.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || !test::wait_for(probe, POLLIN, deadline)) {
      break;
    }
  }
  return parse_size(reply);
}

// Opens `count` connections with `open_idle(i)` (connection i: its round trip made, kept open;
// it may fail with ASSERT_*), reads the worker's pool bytes in use through `read_pool(probe)` on
// a connection opened before them, and expects the growth per connection within `budget`.
template <class ReadPool, class OpenIdle>
void expect_idle_within(uint16_t port, size_t count, size_t budget, const char* what,
                        ReadPool read_pool, OpenIdle open_idle) {
  auto probe = test::connect_loopback(port);
  ASSERT_TRUE(probe);
  const size_t before = read_pool(probe->get());
  ASSERT_GT(before, 0u);
  for (size_t i = 0; i < count; ++i) {
    open_idle(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const size_t after = read_pool(probe->get());
  ASSERT_GT(after, 0u);
  const size_t per_connection = (after - std::min(after, before)) / count;
  std::printf("idle %s: %zu pool bytes (%zu connections)\n", what, per_connection, count);
  EXPECT_LE(per_connection, budget);
}

TEST(ConnectionMemory, IdleEchoConnectionStaysWithinItsBudget) {
  if (sanitized()) GTEST_SKIP() << "release builds only: sanitizers enlarge coroutine frames";
  UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
  const size_t count = raise_fd_limit(1000);
  ASSERT_GE(count, 200u) << "cannot raise the fd limit for the connections";

  TcpServer server(one_worker(), loop_under_test(), &echo_or_report);
  ASSERT_EQ(test::error_text(server.start()), "");
  const Running running(server);
  const uint16_t port = server.local_address().port();

  std::vector<UniqueFd> idle;
  const std::string message(64, 'x');
  std::string scratch(message.size(), '\0');
  expect_idle_within(port, count, kEchoBudget, "echo connection", echo_probe, [&](size_t i) {
    auto connection = test::connect_loopback(port);
    ASSERT_TRUE(connection) << "connection " << i;
    ASSERT_TRUE(test::echo_round_trip(connection->get(), message, scratch)) << "connection " << i;
    idle.push_back(std::move(*connection));
  });
}

// GET /pool answers with the worker's pool bytes in use (the HTTP and WebSocket cases' probe).
void add_pool_route(http::Router& router) {
  router.get("/pool", [](http::Request&, http::Response& res) -> Task<> {
    res.body_buffer() = std::to_string(MemoryPool::thread_stats().bytes_in_use);
    co_return;
  });
}

// The body of a 200 answer to GET `path` on a keep-alive connection ("" otherwise, a failure).
std::string get_body(int fd, std::string_view path, std::string& pending) {
  const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: a\r\n\r\n";
  if (!test::send_text(fd, request)) return {};
  auto reply = test::read_response(fd, pending, 10000);
  EXPECT_TRUE(reply && reply->status == 200)
      << path << ": " << (reply ? reply->head : reply.error().message());
  return reply && reply->status == 200 ? reply->body : std::string();
}

size_t pool_bytes(int probe, std::string& pending) {
  return parse_size(get_body(probe, "/pool", pending));
}

TEST(ConnectionMemory, IdleHttpKeepAliveConnectionStaysWithinItsBudget) {
  if (sanitized()) GTEST_SKIP() << "release builds only: sanitizers enlarge coroutine frames";
  UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
  const size_t count = raise_fd_limit(1000);
  ASSERT_GE(count, 200u) << "cannot raise the fd limit for the connections";

  http::HttpServer server(one_worker(), loop_under_test(), http::HttpOptions{});
  server.router().get("/hello", [](http::Request&, http::Response& res) -> Task<> {
    res.set_body("Hello, World!");
    co_return;
  });
  add_pool_route(server.router());
  ASSERT_EQ(test::error_text(server.start()), "");
  const Running running(server);
  const uint16_t port = server.local_address().port();

  std::string probe_pending;
  const auto read_pool = [&probe_pending](int probe) { return pool_bytes(probe, probe_pending); };
  std::vector<UniqueFd> idle;
  expect_idle_within(port, count, kHttpBudget, "HTTP keep-alive connection", read_pool,
                     [&](size_t i) {
                       auto connection = test::connect_loopback(port);
                       ASSERT_TRUE(connection) << "connection " << i;
                       std::string pending;
                       ASSERT_EQ(get_body(connection->get(), "/hello", pending), "Hello, World!")
                           << "connection " << i;
                       idle.push_back(std::move(*connection));
                     });
}

// The WebSocket echo of proactor_test and bin/http_server; the probe is an HTTP keep-alive
// connection to /pool opened before the WebSocket connections.
TEST(ConnectionMemory, IdleWebSocketConnectionStaysWithinItsBudget) {
  if (sanitized()) GTEST_SKIP() << "release builds only: sanitizers enlarge coroutine frames";
  UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
  const size_t count = raise_fd_limit(1000);
  ASSERT_GE(count, 200u) << "cannot raise the fd limit for the connections";

  http::HttpServer server(one_worker(), loop_under_test(), http::HttpOptions{});
  add_pool_route(server.router());
  server.router().get("/ws", ws::upgrade({}, [](ws::WebSocket& socket) -> Task<> {
                        while (auto message = co_await socket.receive()) {
                          if (!co_await socket.send(message->kind, message->data)) break;
                        }
                      }));
  ASSERT_EQ(test::error_text(server.start()), "");
  const Running running(server);
  const uint16_t port = server.local_address().port();

  std::string probe_pending;
  const auto read_pool = [&probe_pending](int probe) { return pool_bytes(probe, probe_pending); };
  std::vector<test::WsRawClient> idle;
  const std::string message(64, 'w');
  expect_idle_within(
      port, count, kWebSocketBudget, "WebSocket connection", read_pool, [&](size_t i) {
        auto client = test::WsRawClient::open(port, "/ws");
        ASSERT_TRUE(client) << "connection " << i << ": " << client.error().message();
        ASSERT_TRUE(client->send(test::ws_frame(0x82, message))) << "connection " << i;
        auto echo = client->read_frame();
        ASSERT_TRUE(echo) << "connection " << i << ": " << echo.error().message();
        ASSERT_EQ(echo->payload, message) << "connection " << i;
        idle.push_back(std::move(*client));
      });
}

}  // namespace
}  // namespace ucp
