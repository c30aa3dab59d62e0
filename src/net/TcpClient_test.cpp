// TcpClient over real loopback sockets: an echo TcpServer in this process (its own thread) and
// the client's loop on the test thread. Refused ports, a listener whose accept queue is full (a
// connect that hangs until the timeout), IPv6, names through the resolver, cancellation, and
// connections dropped without close().

#include "ucp/net/TcpClient.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/net/Resolver.h"
#include "ucp/net/Socket.h"

#include "InProcessEchoServer.h"
#include "LoopRunner.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using test::InProcessEchoServer;
using test::make_loop;
using test::run_to_end;

/// Connects, sends `message`, reads the echo back, closes. Records what it got and why it
/// stopped.
struct Exchange {
  std::string echoed;
  std::error_code error;
  InetAddress peer;
  bool closed = false;
};

Task<> exchange(EventLoop& loop, std::string host, uint16_t port, ClientOptions options,
                Exchange& out, std::string message = "hello over a client connection") {
  auto conn = co_await TcpClient::connect(loop, std::move(host), port, options);
  if (!conn) {
    out.error = conn.error();
    co_return;
  }
  out.peer = (*conn)->peer();
  if (auto sent = co_await (*conn)->write_all(std::span<const char>(message)); !sent) {
    out.error = sent.error();
    co_return;
  }
  char buffer[256];
  while (out.echoed.size() < message.size()) {
    auto n = co_await (*conn)->read(buffer);
    if (!n || *n == 0) {
      out.error = n ? std::make_error_code(std::errc::connection_reset) : n.error();
      co_return;
    }
    out.echoed.append(buffer, *n);
  }
  co_await (*conn)->close();
  out.closed = (*conn)->close_finished();
}

/// A port nothing listens on: bound (so nobody else takes it during the test), not listening.
struct RefusingPort {
  UniqueFd socket;
  uint16_t port = 0;
  RefusingPort() {
    socket = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    auto any = *InetAddress::parse("127.0.0.1", 0);
    EXPECT_EQ(::bind(socket.get(), any.get(), any.length()), 0);
    port = InetAddress::local_of(socket.get())->port();
  }
};

/// A listener whose accept queue is full (backlog 0, one connection queued, never accepted):
/// the kernel drops further SYNs, so a connect hangs until its timeout.
struct FullListener {
  UniqueFd listener;
  std::vector<UniqueFd> queued;
  uint16_t port = 0;
  FullListener() {
    ListenOptions options;
    options.backlog = 0;
    auto fd = listen_on(*InetAddress::parse("127.0.0.1", 0), options);
    EXPECT_TRUE(fd);
    listener = std::move(*fd);
    port = InetAddress::local_of(listener.get())->port();
    const auto address = *InetAddress::parse("127.0.0.1", port);
    for (int i = 0; i < 3; ++i) {
      auto filler = open_tcp_socket(AF_INET);
      ::connect(filler->get(), address.get(), address.length());  // EINPROGRESS
      queued.push_back(std::move(*filler));
    }
    std::this_thread::sleep_for(50ms);  // let the first handshake finish and fill the queue
  }
};

size_t open_fds() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

/// Waits (bounded) until the process has at most `count` fds open; returns the last count.
size_t wait_for_fds_at_most(size_t count) {
  size_t now = open_fds();
  for (int i = 0; i < 500 && now > count; ++i) {
    std::this_thread::sleep_for(10ms);
    now = open_fds();
  }
  return now;
}

class TcpClientModes : public ::testing::TestWithParam<bool> {
 protected:
  // true: reads come from a multishot receive into the loop's receive buffers.
  std::unique_ptr<EventLoop> loop_ = make_loop(GetParam() ? 64 : 0);
};

std::string read_mode_name(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "multishot" : "single";
}
INSTANTIATE_TEST_SUITE_P(ReadModes, TcpClientModes, ::testing::Bool(), read_mode_name);

TEST_P(TcpClientModes, ConnectsAndEchoesThroughTheServerConnectionApi) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  Exchange result;
  ClientOptions options;
  options.read_timeout_ms = 5000;
  run_to_end(*loop_, exchange(*loop_, "127.0.0.1", server.port(), options, result));
  EXPECT_FALSE(result.error) << result.error.message();
  EXPECT_EQ(result.echoed, "hello over a client connection");
  EXPECT_TRUE(result.closed);
  EXPECT_EQ(result.peer, *InetAddress::parse("127.0.0.1", server.port()));
  EXPECT_EQ(loop_->in_flight(), 0u);
}

TEST_P(TcpClientModes, ManyConnectionsAtOnceEachEchoTheirOwnBytes) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  constexpr int kClients = 50;
  std::vector<Exchange> results(kClients);
  run_to_end(*loop_, [](EventLoop& l, uint16_t port, std::vector<Exchange>& out) -> Task<> {
    int done = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      l.spawn([](EventLoop& l2, uint16_t p, Exchange& e, size_t n, int& finished) -> Task<> {
        co_await exchange(l2, "127.0.0.1", p, {}, e, "client " + std::to_string(n));
        ++finished;
      }(l, port, out[i], i, done));
    }
    for (int i = 0; i < 10000 && done < static_cast<int>(out.size()); ++i) {
      co_await io::sleep_for(l, 1ms);
    }
  }(*loop_, server.port(), results));
  for (int i = 0; i < kClients; ++i) {
    EXPECT_FALSE(results[static_cast<size_t>(i)].error) << i;
    EXPECT_EQ(results[static_cast<size_t>(i)].echoed, "client " + std::to_string(i));
  }
}

TEST(TcpClient, ARefusingPortIsConnectionRefused) {
  RefusingPort refusing;
  auto loop = make_loop();
  Exchange result;
  run_to_end(*loop, exchange(*loop, "127.0.0.1", refusing.port, {}, result));
  EXPECT_EQ(result.error, std::errc::connection_refused) << result.error.message();
}

TEST(TcpClient, AConnectThatHangsEndsTimedOutAfterTheTimeout) {
  FullListener full;
  auto loop = make_loop();
  Exchange result;
  ClientOptions options;
  options.connect_timeout_ms = 200;
  run_to_end(*loop, exchange(*loop, "127.0.0.1", full.port, options, result));
  if (!result.error) GTEST_SKIP() << "this kernel accepted past a full accept queue";
  EXPECT_EQ(result.error, std::errc::timed_out) << result.error.message();
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(TcpClient, AStopTokenCancelsAConnectInProgress) {
  FullListener full;
  auto loop = make_loop();
  StopSource stop;
  Exchange result;
  ClientOptions options;
  options.stop = stop.token();
  run_to_end(
      *loop,
      [](EventLoop& l, uint16_t port, ClientOptions o, StopSource& s, Exchange& out) -> Task<> {
        l.spawn([](EventLoop& l2, StopSource& s2) -> Task<> {
          co_await io::sleep_for(l2, 30ms);
          s2.request_stop();
        }(l, s));
        co_await exchange(l, "127.0.0.1", port, o, out);
      }(*loop, full.port, options, stop, result));
  if (!result.error) GTEST_SKIP() << "this kernel accepted past a full accept queue";
  EXPECT_EQ(result.error, std::errc::operation_canceled) << result.error.message();
}

TEST(TcpClient, AStoppedTokenFailsAtOnce) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  auto loop = make_loop();
  StopSource stop;
  stop.request_stop();
  Exchange result;
  ClientOptions options;
  options.stop = stop.token();
  run_to_end(*loop, exchange(*loop, "127.0.0.1", server.port(), options, result));
  EXPECT_EQ(result.error, std::errc::operation_canceled);
}

TEST(TcpClient, ConnectsOverIpv6) {
  InProcessEchoServer server("::1");
  if (!server.started()) GTEST_SKIP() << "no IPv6 loopback here: " << server.error();
  for (const char* host : {"::1", "[::1]"}) {
    auto loop = make_loop();
    Exchange result;
    run_to_end(*loop, exchange(*loop, host, server.port(), {}, result));
    EXPECT_FALSE(result.error) << host << ": " << result.error.message();
    EXPECT_EQ(result.echoed, "hello over a client connection");
    EXPECT_EQ(result.peer.family(), AF_INET6);
  }
}

TEST(TcpClient, ResolvesLocalhost) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  auto loop = make_loop();
  Exchange result;
  run_to_end(*loop, exchange(*loop, "localhost", server.port(), {}, result));
  // localhost may resolve to ::1 first, where nothing listens: that address is refused and
  // the next one, 127.0.0.1, connects.
  EXPECT_FALSE(result.error) << result.error.message();
  EXPECT_EQ(result.echoed, "hello over a client connection");
  EXPECT_EQ(result.peer, *InetAddress::parse("127.0.0.1", server.port()));
}

/// A resolver answering every name with `addresses` (ports as given), or blocking until
/// released when `hold` is set.
struct FakeNames {
  std::vector<InetAddress> addresses;
  int status = 0;
  bool hold = false;
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
  std::atomic<int> answered{0};

  ResolverOptions options() {
    ResolverOptions o;
    o.threads = 1;
    o.lookup = [this](const std::string&, uint16_t, int, std::vector<InetAddress>& out) {
      if (hold) {
        std::unique_lock lock(mutex);
        released_cv.wait_for(lock, 10s, [this] { return released; });
      }
      out = addresses;
      answered.fetch_add(1);
      return status;
    };
    return o;
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    released_cv.notify_all();
  }
  void wait_answered() {
    for (int i = 0; i < 10000 && answered.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  }
};

TEST(TcpClient, TriesTheResolvedAddressesInOrder) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  RefusingPort refusing;
  FakeNames names;
  names.addresses = {*InetAddress::parse("127.0.0.1", refusing.port),
                     *InetAddress::parse("127.0.0.1", server.port())};
  Resolver resolver(names.options());
  auto loop = make_loop();
  Exchange result;
  ClientOptions options;
  options.resolver = &resolver;
  run_to_end(*loop, exchange(*loop, "two.addresses.test", 1, options, result));
  EXPECT_FALSE(result.error) << result.error.message();
  EXPECT_EQ(result.peer.port(), server.port());

  // All refused: the error is the last address's.
  names.addresses = {*InetAddress::parse("127.0.0.1", refusing.port)};
  Exchange refused;
  auto loop2 = make_loop();
  run_to_end(*loop2, exchange(*loop2, "refused.test", 1, options, refused));
  EXPECT_EQ(refused.error, std::errc::connection_refused);
}

TEST(TcpClient, ANameThatDoesNotResolveIsAResolveError) {
  FakeNames names;
  names.status = EAI_NONAME;
  Resolver resolver(names.options());
  auto loop = make_loop();
  Exchange result;
  ClientOptions options;
  options.resolver = &resolver;
  run_to_end(*loop, exchange(*loop, "no.such.host.test", 80, options, result));
  EXPECT_EQ(result.error, ResolveErrc::kHostNotFound);
  EXPECT_EQ(result.error.message(), ::gai_strerror(EAI_NONAME));
}

TEST(TcpClient, AResolutionIsCancelledByTheStopTokenAndByTheTimeout) {
  FakeNames names;
  names.hold = true;
  Resolver resolver(names.options());
  auto loop = make_loop();
  StopSource stop;
  Exchange stopped;
  Exchange timed;
  run_to_end(*loop,
             [](EventLoop& l, Resolver& r, StopSource& s, Exchange& a, Exchange& b) -> Task<> {
               ClientOptions by_stop;
               by_stop.resolver = &r;
               by_stop.stop = s.token();
               l.spawn([](EventLoop& l2, StopSource& s2) -> Task<> {
                 co_await io::sleep_for(l2, 20ms);
                 s2.request_stop();
               }(l, s));
               co_await exchange(l, "held.test", 80, by_stop, a);
               ClientOptions by_time;
               by_time.resolver = &r;
               by_time.connect_timeout_ms = 30;
               co_await exchange(l, "held.test", 80, by_time, b);
             }(*loop, resolver, stop, stopped, timed));
  EXPECT_EQ(stopped.error, std::errc::operation_canceled);
  EXPECT_EQ(timed.error, std::errc::timed_out);
  names.release();  // the held lookups answer a loop that no longer waits
  names.wait_answered();
}

// Drops connections without close() in the three places a handle can die: on the running loop
// (with a multishot receive and queued output in flight), in a frame the loop destroys at
// shutdown, and after run() returned. Every fd is closed in the end (and ASan sees no leak).
TEST(TcpClient, DroppedConnectionsAreClosedAndFreed) {
  InProcessEchoServer server;
  ASSERT_TRUE(server.started()) << server.error();
  const size_t baseline = open_fds();
  std::vector<ClientConnection> kept;  // outlives the loop's run()
  {
    auto loop = make_loop(64);
    run_to_end(
        *loop, [](EventLoop& l, uint16_t port, std::vector<ClientConnection>& keep) -> Task<> {
          for (int i = 0; i < 10; ++i) {
            auto conn = co_await TcpClient::connect(l, "127.0.0.1", port);
            EXPECT_TRUE(conn);
            if (!conn) co_return;
            const char ping[] = "ping";
            EXPECT_TRUE(co_await (*conn)->write_all(std::span<const char>(ping, 4)));
            char buffer[8];
            EXPECT_TRUE(co_await (*conn)->read(buffer));  // the multishot receive stays armed
            EXPECT_TRUE(co_await (*conn)->write(std::span<const char>(ping, 4)));  // queued
            if (i % 3 == 0) {
              keep.push_back(std::move(*conn));  // dropped after run() returned
            } else if (i % 3 == 1) {
              l.spawn([](EventLoop& l2, ClientConnection c) -> Task<> {
                co_await io::sleep_for(l2, 1h);  // destroyed, with `c`, by the loop's shutdown
                c.reset();
              }(l, std::move(*conn)));
            }  // else: dropped here, on the running loop
          }
          co_await io::sleep_for(l, 50ms);  // the background closes run
        }(*loop, server.port(), kept));
    kept.clear();
  }
  EXPECT_EQ(wait_for_fds_at_most(baseline), baseline);
}

}  // namespace
}  // namespace ucp
