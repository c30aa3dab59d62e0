// ReconnectingClient over loopback, on both backends: a server that stops and comes back on
// the same port under a running client, the back-off's growth, cap and jitter against a port
// that refuses, max_attempts, and a stop token ending a wait, an attempt or a session.

#include "ucp/net/ReconnectingClient.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpServer.h"

#include "Backends.h"
#include "ErrorText.h"
#include "InProcessEchoServer.h"
#include "LoopRunner.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

/// An echo server on its own thread, on a port given (0: any), that can stop and start again.
class RestartableEcho {
 public:
  explicit RestartableEcho(BackendKind backend) : backend_(backend) {}
  ~RestartableEcho() { stop(); }
  bool start(uint16_t port) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = port;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 1000;
    LoopOptions loop;
    loop.backend = backend_;
    loop.ring_entries = 64;
    server_ = std::make_unique<TcpServer>(options, loop, &test::echo_handler);
    const std::string error = test::error_text(server_->start());
    EXPECT_EQ(error, "");
    if (!error.empty()) return false;
    port_ = server_->local_address().port();
    thread_ = std::thread([this] { server_->run(); });
    return true;
  }
  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
    server_.reset();
  }
  uint16_t port() const { return port_; }

 private:
  BackendKind backend_;
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

/// A port nothing listens on (bound, so nobody takes it during the test).
struct RefusingPort {
  UniqueFd socket{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  uint16_t port = 0;
  RefusingPort() {
    auto any = *InetAddress::parse("127.0.0.1", 0);
    EXPECT_EQ(::bind(socket.get(), any.get(), any.length()), 0);
    port = InetAddress::local_of(socket.get())->port();
  }
};

/// Sends `text` and reads the echo; false on any failure.
Task<bool> echoes(TcpConnection& conn, std::string text) {
  if (!co_await conn.write_all(std::span<const char>(text))) co_return false;
  std::string got;
  char buffer[256];
  while (got.size() < text.size()) {
    auto n = co_await conn.read(buffer);
    if (!n || *n == 0) co_return false;
    got.append(buffer, *n);
  }
  co_return got == text;
}

class Reconnecting : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam());
    LoopOptions options;
    options.backend = GetParam();
    options.ring_entries = 64;
    auto loop = EventLoop::create(options);
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
  }
  std::unique_ptr<EventLoop> loop_;
};

INSTANTIATE_TEST_SUITE_P(Backends, Reconnecting, test::kAllBackends, test::backend_name);

// The server goes away under a session and comes back on the same port after two refused
// attempts: the client's session ends, it backs off, and the next connection echoes again.
TEST_P(Reconnecting, FollowsAServerThatRestartsOnItsPort) {
  RestartableEcho server(GetParam());
  ASSERT_TRUE(server.start(0));
  const uint16_t port = server.port();
  std::vector<bool> sessions;
  std::vector<std::error_code> retried;
  StopSource stop;
  ReconnectOptions options;
  options.initial_delay = 5ms;
  options.max_delay = 40ms;
  options.healthy_after = 1h;  // every session here is short: each ends in a back-off
  options.stop = stop.token();
  ReconnectingClient client(*loop_, "127.0.0.1", port, options);
  client.on_retry([&](std::error_code error, std::chrono::milliseconds) {
    retried.push_back(error);
    if (retried.size() == 2) {
      EXPECT_TRUE(server.start(port));  // back on the same port
    }
  });
  Result<void> ended;
  test::run_to_end(*loop_, [&]() -> Task<> {
    ended = co_await client.run([&](TcpConnection& conn) -> Task<> {
      sessions.push_back(co_await echoes(conn, "session " + std::to_string(sessions.size())));
      if (sessions.size() == 1) {
        server.stop();  // the server goes away: the session sees its connection end
        char buffer[16];
        auto n = co_await conn.read(buffer);
        EXPECT_TRUE(!n || *n == 0);
      } else {
        stop.request_stop();
      }
    });
  }());
  EXPECT_TRUE(ended) << ended.error().message();
  EXPECT_EQ(sessions, (std::vector<bool>{true, true}));
  ASSERT_EQ(retried.size(), 2u);
  EXPECT_EQ(retried[0], std::errc::connection_refused);
  EXPECT_EQ(client.connections(), 2u);
  EXPECT_EQ(client.failures(), 2u);
}

// Without jitter the waits double from initial_delay up to max_delay; max_attempts ends it with
// the last attempt's error.
TEST_P(Reconnecting, BacksOffExponentiallyUpToTheCap) {
  RefusingPort refusing;
  std::vector<int64_t> waits;
  ReconnectOptions options;
  options.initial_delay = 2ms;
  options.max_delay = 10ms;
  options.jitter = 0;
  options.max_attempts = 6;
  ReconnectingClient client(*loop_, "127.0.0.1", refusing.port, options);
  client.on_retry(
      [&](std::error_code, std::chrono::milliseconds wait) { waits.push_back(wait.count()); });
  std::error_code error;
  test::run_to_end(*loop_, [&]() -> Task<> { error = (co_await client.connect()).error(); }());
  EXPECT_EQ(error, std::errc::connection_refused);
  EXPECT_EQ(waits, (std::vector<int64_t>{2, 4, 8, 10, 10}));  // none after the sixth attempt
  EXPECT_EQ(client.failures(), 6u);
}

TEST_P(Reconnecting, JitterCutsEachWaitAtRandomWithinItsShare) {
  RefusingPort refusing;
  std::vector<int64_t> waits;
  ReconnectOptions options;
  options.initial_delay = 8ms;
  options.max_delay = 8ms;
  options.jitter = 0.5;
  options.max_attempts = 9;
  ReconnectingClient client(*loop_, "127.0.0.1", refusing.port, options);
  client.on_retry(
      [&](std::error_code, std::chrono::milliseconds wait) { waits.push_back(wait.count()); });
  test::run_to_end(*loop_, [&]() -> Task<> { (void)co_await client.connect(); }());
  ASSERT_EQ(waits.size(), 8u);
  for (int64_t wait : waits) {
    EXPECT_GE(wait, 4);
    EXPECT_LE(wait, 8);
  }
}

// A stop during a long wait ends connect() at once with operation_canceled; so does a stop
// requested before the call.
TEST_P(Reconnecting, AStopEndsAWaitAtOnce) {
  RefusingPort refusing;
  StopSource stop;
  ReconnectOptions options;
  options.initial_delay = 1h;
  options.stop = stop.token();
  ReconnectingClient client(*loop_, "127.0.0.1", refusing.port, options);
  client.on_retry([&](std::error_code, std::chrono::milliseconds) {
    loop_->post([&stop] { stop.request_stop(); });  // stopped while it waits the hour
  });
  std::error_code during, after;
  test::run_to_end(
      *loop_,
      [&]() -> Task<> {
        during = (co_await client.connect()).error();
        after = (co_await client.connect()).error();
      }(),
      10s);
  EXPECT_EQ(during, std::errc::operation_canceled);
  EXPECT_EQ(after, std::errc::operation_canceled);
  EXPECT_EQ(client.failures(), 1u);
}

// run(): a stop ends the session's reads, its connection is closed, and run() succeeds.
TEST_P(Reconnecting, AStopEndsARunningSession) {
  RestartableEcho server(GetParam());
  ASSERT_TRUE(server.start(0));
  StopSource stop;
  ReconnectOptions options;
  options.stop = stop.token();
  ReconnectingClient client(*loop_, "127.0.0.1", server.port(), options);
  std::error_code read_error;
  Result<void> ended;
  test::run_to_end(*loop_, [&]() -> Task<> {
    ended = co_await client.run([&](TcpConnection& conn) -> Task<> {
      loop_->post([&stop] { stop.request_stop(); });
      char buffer[16];
      auto n = co_await conn.read(buffer);  // nothing comes: only the stop ends it
      read_error = n ? std::error_code() : n.error();
    });
  }());
  EXPECT_TRUE(ended) << ended.error().message();
  EXPECT_EQ(read_error, std::errc::operation_canceled);
  EXPECT_EQ(client.connections(), 1u);
}

}  // namespace
}  // namespace ucp
