// TcpServer over real loopback sockets: an in-process server on a free port, plain
// blocking clients with receive timeouts (every wait is bounded).

#include "ucp/net/TcpServer.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "Backends.h"
#include "ErrorText.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

Task<> echo_handler(TcpConnection& connection) {
  std::array<std::byte, 4096> buffer;
  for (;;) {
    auto n = co_await connection.read(buffer);
    if (!n || *n == 0) co_return;
    if (!co_await connection.write_all(std::span(buffer.data(), *n))) co_return;
  }
}

// The same echo through receive(): bytes arrive in a lent buffer (provided ring, registered
// or pool) and are written back from it.
Task<> lending_echo_handler(TcpConnection& connection) {
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;
    if (!co_await connection.write_all(data->bytes())) co_return;
  }
}

struct ServerParams {
  uint32_t threads;
  bool sqpoll;
  bool defer_taskrun;
  uint32_t provided_buffers = 0;    // > 0: multishot recv into a provided buffer ring
  uint32_t registered_buffers = 0;  // > 0: fixed buffers for single-shot receive() and writes
  bool receive_api = false;         // echo through receive() instead of read()
  bool msg_ring = false;            // hand accepted fds to workers with IORING_OP_MSG_RING
  BackendKind backend = BackendKind::kIoUring;
  Acceptors acceptors = Acceptors::kMain;  // kPerWorker: each worker on its own SO_REUSEPORT
};

class RunningServer {
 public:
  explicit RunningServer(ServerParams params, uint32_t read_timeout_ms = 10000,
                         uint32_t max_connections = 100000) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = params.threads;
    options.read_timeout_ms = read_timeout_ms;
    options.max_connections = max_connections;
    options.shutdown_timeout_ms = 3000;
    options.msg_ring_handoff = params.msg_ring;
    options.acceptors = params.acceptors;
    LoopOptions loop;
    loop.backend = params.backend;
    loop.ring_entries = 256;
    loop.sqpoll = params.sqpoll;
    loop.defer_taskrun = params.defer_taskrun;
    loop.provided_buffers_count = params.provided_buffers;
    loop.provided_buffer_size = 4096;
    loop.registered_buffers_count = params.registered_buffers;
    loop.registered_buffer_size = 4096;
    server_ = std::make_unique<TcpServer>(
        options, loop, params.receive_api ? &lending_echo_handler : &echo_handler);
    std::string error = test::error_text(server_->start());
    EXPECT_EQ(error, "");
    port_ = server_->local_address().port();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningServer() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  uint16_t port() const { return port_; }
  TcpServer& server() { return *server_; }

 private:
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

UniqueFd connect_to(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return UniqueFd();
  }
  timeval timeout{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;  // io_uring task-work notifications interrupt us
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Receives exactly `size` bytes (or fewer if the peer closes or 10 s pass without data).
std::string recv_exact(int fd, size_t size) {
  std::string out;
  out.resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::recv(fd, out.data() + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

// One recv(2), retried on EINTR: its result says data (> 0), EOF (0) or an error (< 0).
ssize_t recv_once(int fd, char* byte) {
  ssize_t n;
  do {
    n = ::recv(fd, byte, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n;
}

std::string pattern(size_t size, unsigned seed) {
  std::string s(size, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class TcpServerMatrix : public ::testing::TestWithParam<ServerParams> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam().backend); }
};

TEST_P(TcpServerMatrix, EchoesEverySizeFromOneByteToOneMebibyte) {
  RunningServer server(GetParam());
  for (size_t size :
       {size_t{1}, size_t{100}, size_t{4096}, size_t{4097}, size_t{65536}, size_t{1} << 20}) {
    UniqueFd client = connect_to(server.port());
    ASSERT_TRUE(client);
    std::string data = pattern(size, static_cast<unsigned>(size));
    std::thread writer([&] { EXPECT_TRUE(send_all(client.get(), data.data(), data.size())); });
    std::string echoed = recv_exact(client.get(), size);
    writer.join();
    EXPECT_EQ(echoed.size(), size);
    EXPECT_TRUE(echoed == data) << "payload of " << size << " bytes differs";
  }
}

TEST_P(TcpServerMatrix, EchoesRandomlyChunkedStreamsInOrder) {
  RunningServer server(GetParam());
  UniqueFd client = connect_to(server.port());
  ASSERT_TRUE(client);
  std::string data = pattern(300000, 7);
  std::thread writer([&] {
    std::mt19937 rng(3);
    size_t offset = 0;
    while (offset < data.size()) {
      size_t chunk = std::min<size_t>(1 + rng() % 9000, data.size() - offset);
      ASSERT_TRUE(send_all(client.get(), data.data() + offset, chunk));
      offset += chunk;
    }
  });
  std::string echoed = recv_exact(client.get(), data.size());
  writer.join();
  EXPECT_TRUE(echoed == data);
}

TEST_P(TcpServerMatrix, ServesTwoHundredConcurrentConnections) {
  RunningServer server(GetParam());
  constexpr int kConnections = 200, kRounds = 20;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      std::vector<UniqueFd> fds;
      for (int i = 0; i < kConnections / 4; ++i) fds.push_back(connect_to(server.port()));
      for (int round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < fds.size(); ++i) {
          std::string message =
              "c" + std::to_string(t) + "-" + std::to_string(i) + "-" + std::to_string(round);
          if (!send_all(fds[i].get(), message.data(), message.size())) return;
          if (recv_exact(fds[i].get(), message.size()) != message) return;
        }
      }
      ok += static_cast<int>(fds.size());
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), kConnections);
}

TEST_P(TcpServerMatrix, HalfClosedPeerStillGetsEveryByteThenEof) {
  RunningServer server(GetParam());
  UniqueFd client = connect_to(server.port());
  ASSERT_TRUE(client);
  std::string data = pattern(200000, 11);
  ASSERT_TRUE(send_all(client.get(), data.data(), 100000));
  std::thread writer([&] {
    EXPECT_TRUE(send_all(client.get(), data.data() + 100000, 100000));
    ::shutdown(client.get(), SHUT_WR);  // request sent: only our write side closes
  });
  std::string echoed = recv_exact(client.get(), data.size());
  writer.join();
  EXPECT_TRUE(echoed == data);
  char byte;
  EXPECT_EQ(recv_once(client.get(), &byte), 0);  // then the server closes
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, TcpServerMatrix,
    ::testing::Values(
        ServerParams{1, false, true}, ServerParams{3, false, true}, ServerParams{1, true, false},
        ServerParams{3, true, false}, ServerParams{1, false, false},
        ServerParams{1, false, true, 256}, ServerParams{3, false, true, 256},
        ServerParams{1, true, false, 256}, ServerParams{1, false, true, 4},
        // receive(): registered buffers on (64; 2 = most reads fall back to the
        // pool), off, and lent from the multishot ring (256; 4 = ring runs dry)
        ServerParams{1, false, true, 0, 64, true}, ServerParams{3, false, true, 0, 64, true},
        ServerParams{1, true, false, 0, 64, true}, ServerParams{3, true, false, 0, 64, true},
        ServerParams{1, false, true, 0, 2, true}, ServerParams{1, false, true, 0, 0, true},
        ServerParams{1, false, true, 256, 0, true}, ServerParams{3, true, false, 256, 0, true},
        ServerParams{1, false, true, 4, 0, true},
        // msg_ring hand-off instead of post + eventfd
        ServerParams{1, false, true, 0, 0, false, true},
        ServerParams{3, false, true, 0, 0, false, true},
        ServerParams{3, true, false, 0, 0, false, true},
        ServerParams{3, false, false, 0, 0, false, true},
        ServerParams{3, false, true, 256, 0, false, true},
        ServerParams{3, false, true, 0, 64, true, true},
        // epoll: single-shot and multishot reads (4 = the buffer stack runs dry), read() and
        // receive(), one and three workers; msg_ring and registered buffers are io_uring only
        // (a warning each, then the task queue and pool blocks)
        ServerParams{1, false, true, 0, 0, false, false, BackendKind::kEpoll},
        ServerParams{3, false, true, 0, 0, false, false, BackendKind::kEpoll},
        ServerParams{1, false, true, 256, 0, false, false, BackendKind::kEpoll},
        ServerParams{3, false, true, 256, 0, false, false, BackendKind::kEpoll},
        ServerParams{1, false, true, 4, 0, false, false, BackendKind::kEpoll},
        ServerParams{1, false, true, 0, 0, true, false, BackendKind::kEpoll},
        ServerParams{1, false, true, 256, 0, true, false, BackendKind::kEpoll},
        ServerParams{3, false, true, 256, 0, true, false, BackendKind::kEpoll},
        ServerParams{1, false, true, 4, 0, true, false, BackendKind::kEpoll},
        ServerParams{3, false, true, 0, 0, false, true, BackendKind::kEpoll},
        ServerParams{1, false, true, 0, 64, true, false, BackendKind::kEpoll},
        // every worker accepts on its own SO_REUSEPORT socket (no hand-off)
        ServerParams{1, false, true, 256, 0, false, false, BackendKind::kIoUring,
                     Acceptors::kPerWorker},
        ServerParams{3, false, true, 256, 0, false, false, BackendKind::kIoUring,
                     Acceptors::kPerWorker},
        ServerParams{3, false, true, 0, 0, true, false, BackendKind::kIoUring,
                     Acceptors::kPerWorker},
        ServerParams{3, false, true, 256, 0, false, false, BackendKind::kEpoll,
                     Acceptors::kPerWorker},
        ServerParams{3, false, true, 0, 0, false, false, BackendKind::kEpoll,
                     Acceptors::kPerWorker}),
    [](const auto& param_info) {
      const ServerParams& p = param_info.param;
      if (p.backend == BackendKind::kEpoll) {
        return std::string("epoll_threads") + std::to_string(p.threads) +
               (p.provided_buffers ? "_multishot" + std::to_string(p.provided_buffers) : "") +
               (p.registered_buffers ? "_registered" + std::to_string(p.registered_buffers) : "") +
               (p.receive_api ? "_receive" : "") + (p.msg_ring ? "_msgring" : "") +
               (p.acceptors == Acceptors::kPerWorker ? "_per_worker" : "");
      }
      return "threads" + std::to_string(p.threads) + (p.sqpoll ? "_sqpoll" : "") +
             (p.defer_taskrun ? "_defer" : "_coop") +
             (p.provided_buffers ? "_multishot" + std::to_string(p.provided_buffers) : "") +
             (p.registered_buffers ? "_registered" + std::to_string(p.registered_buffers) : "") +
             (p.receive_api ? "_receive" : "") + (p.msg_ring ? "_msgring" : "") +
             (p.acceptors == Acceptors::kPerWorker ? "_per_worker" : "");
    });

// receive() really lends what the configuration promises: ring buffers with multishot,
// registered buffers for single-shot reads (pool blocks once all are borrowed).
std::array<std::atomic<int>, 4> g_lease_sources{};

Task<> counting_echo_handler(TcpConnection& connection) {
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;
    g_lease_sources[static_cast<size_t>(data->source())]++;
    if (!co_await connection.write_all(data->bytes())) co_return;
  }
}

std::array<int, 4> lease_sources_after_echo(BackendKind backend, uint32_t provided,
                                            uint32_t registered) {
  for (auto& count : g_lease_sources) count = 0;
  ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = 0;
  LoopOptions loop;
  loop.backend = backend;
  loop.ring_entries = 64;
  loop.provided_buffers_count = provided;
  loop.registered_buffers_count = registered;
  TcpServer server(options, loop, &counting_echo_handler);
  EXPECT_EQ(test::error_text(server.start()), "");
  std::thread runner([&] { server.run(); });
  {
    UniqueFd client = connect_to(server.local_address().port());
    for (int i = 0; i < 10; ++i) {
      std::string message = "lease " + std::to_string(i);
      EXPECT_TRUE(send_all(client.get(), message.data(), message.size()));
      EXPECT_EQ(recv_exact(client.get(), message.size()), message);
    }
  }
  server.stop();
  runner.join();
  std::array<int, 4> counts{};
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = g_lease_sources[i].load();
  return counts;
}

// The tests of TcpServerBackends run on io_uring and on epoll.
class TcpServerBackends : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
  ServerParams params(uint32_t threads, uint32_t provided_buffers = 0,
                      Acceptors acceptors = Acceptors::kMain) const {
    ServerParams p{threads, false, true, provided_buffers};
    p.backend = GetParam();
    p.acceptors = acceptors;
    return p;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, TcpServerBackends, test::kAllBackends, test::backend_name);

TEST_P(TcpServerBackends, ReceiveLendsRingRegisteredOrPoolBuffersAsConfigured) {
  using Source = BufferLease::Source;
  auto multishot = lease_sources_after_echo(GetParam(), 64, 0);
  EXPECT_EQ(multishot[size_t(Source::kReceiveBuffer)], 10);
  // Registered buffers exist on io_uring only: epoll reads into pool blocks instead.
  auto registered = lease_sources_after_echo(GetParam(), 0, 8);
  EXPECT_EQ(
      registered[size_t(GetParam() == BackendKind::kIoUring ? Source::kRegistered : Source::kPool)],
      10);
  auto plain = lease_sources_after_echo(GetParam(), 0, 0);
  EXPECT_EQ(plain[size_t(Source::kPool)], 10);
}

// (provided buffers: 0 = single-shot reads with a linked timeout, else multishot; backend)
class TcpServerTimeouts : public ::testing::TestWithParam<std::tuple<uint32_t, BackendKind>> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(std::get<1>(GetParam())); }
};

TEST_P(TcpServerTimeouts, IdleConnectionIsClosedNearTheReadTimeoutWhileASlowSenderSurvives) {
  constexpr auto kReadTimeout = 2000ms;
  ServerParams params{1, false, true, std::get<0>(GetParam())};
  params.backend = std::get<1>(GetParam());
  RunningServer server(params, /*read_timeout_ms=*/static_cast<uint32_t>(kReadTimeout.count()));
  UniqueFd idle = connect_to(server.port());
  UniqueFd slow = connect_to(server.port());
  ASSERT_TRUE(idle && slow);
  auto start = std::chrono::steady_clock::now();
  std::atomic<bool> idle_closed{false};
  std::atomic<int> echoed_after_idle_closed{0};
  std::thread slow_sender([&] {
    // One byte every 100 ms for 4 s: each read completes well inside the timeout (missing it
    // takes a pause 20 times as long; with a 400 ms timeout, a 300 ms stall of either side,
    // which a loaded machine does see, cut this connection), and it outlives the idle one.
    for (int i = 0; i < 40; ++i) {
      char c = static_cast<char>('A' + i);
      ASSERT_TRUE(send_all(slow.get(), &c, 1));
      ASSERT_EQ(recv_exact(slow.get(), 1), std::string(1, c)) << "byte " << i;
      if (idle_closed.load()) ++echoed_after_idle_closed;
      std::this_thread::sleep_for(100ms);
    }
  });
  char byte;
  ssize_t n = recv_once(idle.get(), &byte);  // blocks until the server closes (10 s at most)
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  idle_closed = true;
  EXPECT_EQ(n, 0);
  EXPECT_GE(waited, kReadTimeout / 2);
  slow_sender.join();
  // Near the timeout, told without a wall-clock bound (the server's loop, which runs both the
  // timer and the slow sender's echoes, may be slowed down by a loaded machine): the idle
  // connection went while the slow sender still had most of its bytes to send.
  EXPECT_GT(echoed_after_idle_closed.load(), 0)
      << "the idle connection was closed after " << waited.count()
      << " ms, once the slow sender was done";
}

INSTANTIATE_TEST_SUITE_P(ReadModes, TcpServerTimeouts,
                         ::testing::Combine(::testing::Values(0u, 64u), test::kAllBackends),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param) ? "multishot"
                                                                            : "linked_timeout") +
                                  "_" + test::backend_label(std::get<1>(param_info.param));
                         });

TEST_P(TcpServerBackends, SurvivesAStormOfResetsAndKeepsServing) {
  RunningServer server(params(2));
  std::string data = pattern(32768, 5);
  for (int i = 0; i < 500; ++i) {
    UniqueFd client = connect_to(server.port());
    ASSERT_TRUE(client);
    send_all(client.get(), data.data(), data.size());
    linger hard{1, 0};  // close now with RST, possibly while the server is writing to us
    ::setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  }
  UniqueFd after = connect_to(server.port());
  ASSERT_TRUE(after);
  ASSERT_TRUE(send_all(after.get(), "still here", 10));
  EXPECT_EQ(recv_exact(after.get(), 10), "still here");
  for (int i = 0; i < 2000 && server.server().connection_count() > 1; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server.server().connection_count(), 1u);  // every reset connection was freed
}

TEST_P(TcpServerBackends, ClosesConnectionsBeyondMaxConnections) {
  RunningServer server(params(1), 10000, /*max_connections=*/5);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(connect_to(server.port()));
    ASSERT_TRUE(send_all(held.back().get(), "x", 1));
    ASSERT_EQ(recv_exact(held.back().get(), 1), "x");
  }
  UniqueFd extra = connect_to(server.port());
  ASSERT_TRUE(extra);
  char byte;
  EXPECT_LE(recv_once(extra.get(), &byte), 0);  // closed at once
  EXPECT_EQ(server.server().rejected_connections(), 1u);
  held.pop_back();
  for (int i = 0; i < 2000 && server.server().connection_count() > 4; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  UniqueFd again = connect_to(server.port());  // room again
  ASSERT_TRUE(send_all(again.get(), "y", 1));
  EXPECT_EQ(recv_exact(again.get(), 1), "y");
}

TEST_P(TcpServerBackends, GracefulStopUnderLoadFinishesWritesAndReturns) {
  auto server = std::make_unique<RunningServer>(params(2));
  std::vector<UniqueFd> clients;
  std::string data = pattern(20000, 9);
  for (int i = 0; i < 50; ++i) {
    clients.push_back(connect_to(server->port()));
    ASSERT_TRUE(send_all(clients.back().get(), data.data(), data.size()));
  }
  // Everything sent before stop() was read by the server or is still in flight: whatever
  // the server read, it echoes in full before closing.
  for (auto& c : clients) EXPECT_EQ(recv_exact(c.get(), 100).size(), 100u);
  server->stop();
  for (auto& c : clients) {
    std::string rest = recv_exact(c.get(), data.size());
    EXPECT_LE(rest.size(), data.size() - 100);
    EXPECT_TRUE(data.compare(100, rest.size(), rest) == 0) << "echo corrupted at shutdown";
  }
}

size_t open_fd_count() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

bool wait_for_connections(TcpServer& server, size_t count) {
  for (int i = 0; i < 2000 && server.connection_count() != count; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  return server.connection_count() == count;
}

// Connection set-up is what the hand-off path serves: 2,000 connect / echo / close cycles
// from four client threads, every byte checked, and no fd left behind on either side.
TEST(TcpServer, MsgRingHandOffServesTwoThousandShortConnectionsWithoutLeakingFds) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  size_t before_server = open_fd_count();
  {
    RunningServer server({3, false, true, 0, 0, false, /*msg_ring=*/true});
    ASSERT_TRUE(wait_for_connections(server.server(), 0));
    size_t baseline = open_fd_count();
    constexpr int kThreads = 4, kCycles = 500;
    std::atomic<int> echoed{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t) {
      clients.emplace_back([&, t] {
        for (int i = 0; i < kCycles; ++i) {
          UniqueFd client = connect_to(server.port());
          if (!client) continue;
          std::string message =
              pattern(64 + static_cast<size_t>(i % 200), static_cast<unsigned>(t * kCycles + i));
          if (!send_all(client.get(), message.data(), message.size())) continue;
          if (recv_exact(client.get(), message.size()) == message) ++echoed;
        }
      });
    }
    for (auto& c : clients) c.join();
    EXPECT_EQ(echoed.load(), kThreads * kCycles);
    EXPECT_TRUE(wait_for_connections(server.server(), 0)) << server.server().connection_count();
    if (server.server().main_loop().capabilities().ring_messages) {
      EXPECT_GT(server.server().ring_hand_offs(), 0u) << "msg_ring hand-off was not used";
    }
    EXPECT_EQ(open_fd_count(), baseline) << "fds leaked while serving";
  }
  EXPECT_EQ(open_fd_count(), before_server) << "fds leaked by the server";
}

// Stop while connections keep arriving: fds accepted but not yet served, on their way to a
// worker ring or refused by a stopping worker, must all be closed.
TEST(TcpServer, MsgRingHandOffLeaksNoFdWhenStoppedUnderConnectionChurn) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  size_t before_server = open_fd_count();
  {
    auto server = std::make_unique<RunningServer>(ServerParams{3, false, true, 0, 0, false, true});
    std::atomic<bool> stop_clients{false};
    std::atomic<int> connected{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 3; ++t) {
      clients.emplace_back([&] {
        while (!stop_clients) {
          UniqueFd client = connect_to(server->port());
          if (!client) continue;  // refused once the server stopped listening
          ++connected;
          send_all(client.get(), "x", 1);
        }
      });
    }
    for (int i = 0; i < 30000 && connected.load() < 300; ++i) std::this_thread::sleep_for(1ms);
    EXPECT_GE(connected.load(), 300) << "the clients could not connect";
    server->stop();
    stop_clients = true;
    for (auto& c : clients) c.join();
    server.reset();
  }
  EXPECT_EQ(open_fd_count(), before_server) << "fds leaked at shutdown";
}

TEST_P(TcpServerBackends, ReportsPortInUse) {
  RunningServer first(params(1));
  ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = first.port();
  LoopOptions loop;
  loop.backend = GetParam();
  TcpServer second(options, loop, &echo_handler);
  std::string error = test::error_text(second.start());
  EXPECT_NE(error.find("address already in use"), std::string::npos) << error;
}

// A snapshot taken the way the stats line takes it: collect_stats() on the main loop.
ServerStats collect_stats(TcpServer& server) {
  auto result = std::make_shared<std::promise<ServerStats>>();
  auto future = result->get_future();
  server.main_loop().post([&server, result] {
    server.main_loop().spawn(
        [](TcpServer& target, std::shared_ptr<std::promise<ServerStats>> out) -> Task<> {
          out->set_value(co_await target.collect_stats());
        }(server, result));
  });
  if (future.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "collect_stats() did not finish within 10 s";
    return {};
  }
  return future.get();
}

uint64_t total_accepted(const ServerStats& stats) {
  uint64_t sum = 0;
  for (const auto& worker : stats.workers) sum += worker.connections_accepted;
  return sum;
}

// connect, echo `message`, close: `cycles` times from `threads` client threads.
int echo_cycles(uint16_t port, int threads, int cycles, size_t size) {
  std::atomic<int> echoed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < cycles; ++i) {
        UniqueFd client = connect_to(port);
        if (!client) continue;
        std::string message = pattern(size, static_cast<unsigned>(t * cycles + i));
        if (!send_all(client.get(), message.data(), message.size())) continue;
        if (recv_exact(client.get(), message.size()) == message) ++echoed;
      }
    });
  }
  for (auto& c : clients) c.join();
  return echoed.load();
}

// Main-accepts mode: round-robin, so 10 connections on 2 workers are 5 and 5; bytes count
// for closed connections and for one still open.
TEST_P(TcpServerBackends, StatsCountConnectionsAndBytesPerWorker) {
  RunningServer server(params(2));
  EXPECT_EQ(echo_cycles(server.port(), 1, 10, 100), 10);
  ASSERT_TRUE(wait_for_connections(server.server(), 0));
  UniqueFd open = connect_to(server.port());
  ASSERT_TRUE(send_all(open.get(), "fifty bytes of a connection that stays open.......", 50));
  ASSERT_EQ(recv_exact(open.get(), 50).size(), 50u);
  ServerStats stats = collect_stats(server.server());
  ASSERT_EQ(stats.workers.size(), 2u);
  EXPECT_EQ(stats.workers[0].connections_accepted + stats.workers[1].connections_accepted, 11u);
  EXPECT_GE(stats.workers[0].connections_accepted, 5u);
  EXPECT_GE(stats.workers[1].connections_accepted, 5u);
  EXPECT_EQ(stats.workers[0].connections_open + stats.workers[1].connections_open, 1u);
  EXPECT_EQ(stats.workers[0].bytes_received + stats.workers[1].bytes_received, 1050u);
  EXPECT_EQ(stats.workers[0].bytes_sent + stats.workers[1].bytes_sent, 1050u);
  EXPECT_GT(stats.workers[0].loop.submit_calls, 0u);
  EXPECT_EQ(stats.connections_rejected, 0u);
}

// Per-worker acceptors: every worker accepts on its own SO_REUSEPORT socket, the kernel
// spreads the connections by their addresses, and nothing is handed off.
TEST_P(TcpServerBackends, PerWorkerAcceptorsServeAThousandConnectionsSpreadOverTheWorkers) {
  RunningServer server(params(3, 64, Acceptors::kPerWorker));
  ASSERT_EQ(server.server().acceptors(), Acceptors::kPerWorker);
  EXPECT_NE(server.server().describe_loops().find("acceptors: per_worker"), std::string::npos);
  EXPECT_EQ(echo_cycles(server.port(), 4, 250, 64), 1000);
  ASSERT_TRUE(wait_for_connections(server.server(), 0));
  ServerStats stats = collect_stats(server.server());
  ASSERT_EQ(stats.workers.size(), 3u);
  EXPECT_EQ(total_accepted(stats), 1000u);
  for (size_t i = 0; i < stats.workers.size(); ++i) {
    // A hash of 1,000 random source ports leaves a worker empty with odds below 1e-170.
    EXPECT_GT(stats.workers[i].connections_accepted, 0u) << "worker " << i << " accepted none";
    EXPECT_EQ(stats.workers[i].bytes_received, stats.workers[i].bytes_sent);
  }
}

TEST_P(TcpServerBackends, PerWorkerAcceptorsStopGracefullyAndCloseEveryListener) {
  const size_t before = open_fd_count();
  auto server = std::make_unique<RunningServer>(params(2, 0, Acceptors::kPerWorker));
  const uint16_t port = server->port();
  std::vector<UniqueFd> clients;
  std::string data = pattern(20000, 11);
  for (int i = 0; i < 40; ++i) {
    clients.push_back(connect_to(port));
    ASSERT_TRUE(send_all(clients.back().get(), data.data(), data.size()));
  }
  for (auto& c : clients) EXPECT_EQ(recv_exact(c.get(), 100).size(), 100u);
  server->stop();  // returns once every worker has stopped
  for (auto& c : clients) {
    std::string rest = recv_exact(c.get(), data.size());
    EXPECT_LE(rest.size(), data.size() - 100);
    EXPECT_TRUE(data.compare(100, rest.size(), rest) == 0) << "echo corrupted at shutdown";
  }
  EXPECT_FALSE(connect_to(port)) << "a listener is still open after the stop";
  clients.clear();
  server.reset();
  EXPECT_EQ(open_fd_count(), before) << "fds leaked";
}

// One max_connections across the workers' acceptors: extra connections are refused on
// whichever worker the kernel picks.
TEST_P(TcpServerBackends, MaxConnectionsIsOneLimitAcrossPerWorkerAcceptors) {
  RunningServer server(params(3, 0, Acceptors::kPerWorker), 10000, /*max_connections=*/5);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(connect_to(server.port()));
    ASSERT_TRUE(send_all(held.back().get(), "x", 1));
    ASSERT_EQ(recv_exact(held.back().get(), 1), "x");
  }
  constexpr int kExtra = 12;
  for (int i = 0; i < kExtra; ++i) {
    UniqueFd extra = connect_to(server.port());
    ASSERT_TRUE(extra);
    char byte;
    EXPECT_LE(recv_once(extra.get(), &byte), 0);  // closed at once
  }
  EXPECT_EQ(server.server().rejected_connections(), static_cast<uint64_t>(kExtra));
  ServerStats stats = collect_stats(server.server());
  uint64_t open = 0;
  for (const auto& worker : stats.workers) open += worker.connections_open;
  EXPECT_EQ(open, 5u);
  EXPECT_EQ(stats.connections_rejected, static_cast<uint64_t>(kExtra));
  held.pop_back();
  ASSERT_TRUE(wait_for_connections(server.server(), 4));
  UniqueFd again = connect_to(server.port());  // room again
  ASSERT_TRUE(send_all(again.get(), "y", 1));
  EXPECT_EQ(recv_exact(again.get(), 1), "y");
}

// Per-worker listeners use SO_REUSEPORT, but without server.reuse_port they must not quietly
// join another server's group on the same port.
TEST_P(TcpServerBackends, PerWorkerAcceptorsReportPortInUseUnlessReusePortIsAsked) {
  RunningServer first(params(2, 0, Acceptors::kPerWorker));
  ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = first.port();
  options.thread_num = 2;
  options.acceptors = Acceptors::kPerWorker;
  LoopOptions loop;
  loop.backend = GetParam();
  loop.ring_entries = 64;
  {
    TcpServer second(options, loop, &echo_handler);
    std::string error = test::error_text(second.start());
    EXPECT_NE(error.find("address already in use"), std::string::npos) << error;
  }
  // Asked for: the second server joins the group and the two share the port.
  options.listen.reuse_port = true;
  TcpServer second(options, loop, &echo_handler);
  EXPECT_EQ(test::error_text(second.start()), "");
  EXPECT_EQ(second.local_address().port(), first.port());
}

}  // namespace
}  // namespace ucp
