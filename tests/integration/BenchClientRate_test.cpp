// bench_client --rate checked against servers whose delays are known: the open-loop latency
// tool must never report less than a server's delay, must keep its schedule (counted, not
// timed), and must charge a stall to every request scheduled during it (the
// coordinated-omission correction), in echo and HTTP mode, on both client backends; and must
// say when the server was kept off its CPU (its run-queue wait).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "BackendProbe.h"
#include "Command.h"

namespace {

using namespace std::chrono_literals;

constexpr size_t kSize = 64;  // echo message bytes

// ---- servers -------------------------------------------------------------------------------

int listen_on_loopback(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

/// Waits (100 ms at most) for `fd` to be readable; false when the test is ending.
bool readable(int fd, const std::atomic<bool>& stop) {
  while (!stop.load()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) return true;
  }
  return false;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// A server with one thread per connection, each running `serve(fd, stop)`.
class ThreadedServer {
 public:
  explicit ThreadedServer(std::function<void(int, const std::atomic<bool>&)> serve)
      : serve_(std::move(serve)) {
    listen_fd_ = listen_on_loopback(&port_);
    if (listen_fd_ >= 0) acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~ThreadedServer() {
    stop_.store(true);
    if (acceptor_.joinable()) acceptor_.join();
    for (auto& t : connections_) t.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  bool listening() const { return listen_fd_ >= 0; }

 private:
  void accept_loop() {
    while (readable(listen_fd_, stop_)) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      connections_.emplace_back([this, fd] {
        serve_(fd, stop_);
        ::close(fd);
      });
    }
  }

  std::function<void(int, const std::atomic<bool>&)> serve_;
  std::atomic<bool> stop_{false};
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // the acceptor's alone until it is joined
};

/// Echoes each kSize-byte message after sleeping 1 ms.
void delayed_echo(int fd, const std::atomic<bool>& stop) {
  std::string pending;
  char buffer[4096];
  while (readable(fd, stop)) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    pending.append(buffer, static_cast<size_t>(n));
    while (pending.size() >= kSize) {
      std::this_thread::sleep_for(1ms);
      if (!write_all(fd, pending.data(), kSize)) return;
      pending.erase(0, kSize);
    }
  }
}

/// Answers each GET after sleeping 1 ms, alternating a Content-Length body and a chunked one.
void delayed_http(int fd, const std::atomic<bool>& stop) {
  static const std::string kLength =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n";
  static const std::string kChunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "7\r\nHello, \r\n7\r\nWorld!\n\r\n0\r\n\r\n";
  std::string pending;
  char buffer[4096];
  uint64_t answered = 0;
  while (readable(fd, stop)) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    pending.append(buffer, static_cast<size_t>(n));
    size_t end;
    while ((end = pending.find("\r\n\r\n")) != std::string::npos) {
      std::this_thread::sleep_for(1ms);
      const std::string& answer = answered++ % 2 == 0 ? kLength : kChunked;
      if (!write_all(fd, answer.data(), answer.size())) return;
      pending.erase(0, end + 4);
    }
  }
}

/// One thread for everything, echoing at once, except that when message `stall_at` arrives it
/// stops for `stall` first: every connection waits, as in a garbage-collection pause.
class StallingEchoServer {
 public:
  StallingEchoServer(uint64_t stall_at, std::chrono::milliseconds stall)
      : stall_at_(stall_at), stall_(stall) {
    listen_fd_ = listen_on_loopback(&port_);
    if (listen_fd_ >= 0) thread_ = std::thread([this] { run(); });
  }
  ~StallingEchoServer() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (const pollfd& p : fds_) {
      if (p.fd >= 0 && p.fd != listen_fd_) ::close(p.fd);
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  bool listening() const { return listen_fd_ >= 0; }

 private:
  void run() {
    fds_.push_back({listen_fd_, POLLIN, 0});
    std::vector<std::string> pending(1);
    uint64_t messages = 0;
    char buffer[4096];
    while (!stop_.load()) {
      if (::poll(fds_.data(), fds_.size(), 100) <= 0) continue;
      for (size_t i = 0; i < fds_.size(); ++i) {
        if ((fds_[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        if (i == 0) {
          const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd < 0) continue;
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          fds_.push_back({fd, POLLIN, 0});
          pending.emplace_back();
          continue;
        }
        const ssize_t n = ::recv(fds_[i].fd, buffer, sizeof buffer, 0);
        if (n <= 0) {
          ::close(fds_[i].fd);
          fds_[i].fd = -1;  // poll skips it from now on
          continue;
        }
        pending[i].append(buffer, static_cast<size_t>(n));
        while (pending[i].size() >= kSize) {
          if (++messages == stall_at_) std::this_thread::sleep_for(stall_);
          write_all(fds_[i].fd, pending[i].data(), kSize);
          pending[i].erase(0, kSize);
        }
      }
    }
  }

  uint64_t stall_at_;
  std::chrono::milliseconds stall_;
  std::atomic<bool> stop_{false};
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<pollfd> fds_;
  std::thread thread_;
};

// ---- the client ------------------------------------------------------------------------------

/// What one bench_client --rate --json run reported.
struct Report {
  int exit_code = -1;
  std::string output;
  std::string json;  // the last line that starts with '{'

  /// A number of the JSON line by its key ("p50_us", or "100000" inside count_ge_us).
  double number(const std::string& key) const {
    const auto at = json.find("\"" + key + "\":");
    if (at == std::string::npos) {
      ADD_FAILURE() << "no " << key << " in " << json;
      return -1;
    }
    return std::strtod(json.c_str() + at + key.size() + 3, nullptr);
  }
};

class BenchClientRate : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }

  Report run(uint16_t port, int conns, double rate, int seconds,
             std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {std::string(UCP_BIN_DIR) + "/bench_client",
                                     "-h",
                                     "127.0.0.1",
                                     "-p",
                                     std::to_string(port),
                                     "-c",
                                     std::to_string(conns),
                                     "-s",
                                     std::to_string(kSize),
                                     "-d",
                                     std::to_string(seconds),
                                     "--rate",
                                     std::to_string(rate),
                                     "--json",
                                     GetParam() == "epoll" ? "--epoll" : "--uring"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto result = ucp::test::run_command(args, (seconds + 30) * 1000);
    Report report;
    report.exit_code = result.exit_code;
    report.output = result.output;
    std::istringstream lines(result.output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind('{', 0) == 0) report.json = line;
    }
    return report;
  }
};

/// The requests of a `seconds` interval at `rate`: the schedule is fixed, so the count is
/// exact (to one request at the interval's edge).
void expect_schedule_kept(const Report& r, double rate, int seconds, int conns) {
  const double due = rate * seconds;
  EXPECT_NEAR(r.number("scheduled"), due, 1.0) << r.output;
  EXPECT_EQ(r.number("completed"), r.number("scheduled")) << r.output;
  EXPECT_EQ(r.number("unanswered"), 0) << r.output;
  // Answers that arrived within the interval: the rate, give or take one request per
  // connection at each edge and those a busy machine pushed past the end (5 %).
  EXPECT_NEAR(r.number("answered_in_interval"), due, conns + 0.05 * due) << r.output;
}

TEST_P(BenchClientRate, EveryEchoLatencyIsAtLeastTheServersDelay) {
  ThreadedServer server(delayed_echo);
  ASSERT_TRUE(server.listening());
  const std::string hgrm = ::testing::TempDir() + "bench_client_rate_echo.hgrm";
  const Report r = run(server.port(), 10, 200, 2, {"--hgrm", hgrm});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_schedule_kept(r, 200, 2, 10);
  // Every sample: the server slept 1 ms before answering, so none can be shorter.
  EXPECT_GE(r.number("min_us"), 1000.0) << r.output;
  EXPECT_EQ(r.number("1000"), r.number("completed")) << r.output;

  // The distribution file says the same: its first value is the minimum, its last count all.
  std::ifstream file(hgrm);
  std::string line;
  std::vector<std::string> values;
  while (std::getline(file, line)) {
    if (!line.empty() && line[0] != '#' && line.find("Value") == std::string::npos) {
      values.push_back(line);
    }
  }
  ASSERT_FALSE(values.empty());
  EXPECT_GE(std::strtod(values.front().c_str(), nullptr), 1000.0) << values.front();
  std::istringstream last(values.back());
  double value = 0;
  double percentile = 0;
  double total = 0;
  last >> value >> percentile >> total;
  EXPECT_EQ(percentile, 1.0);
  EXPECT_EQ(total, r.number("completed"));
  std::remove(hgrm.c_str());
}

TEST_P(BenchClientRate, EveryHttpLatencyIsAtLeastTheServersDelay) {
  ThreadedServer server(delayed_http);
  ASSERT_TRUE(server.listening());
  const Report r = run(server.port(), 10, 200, 2, {"--http", "/hello"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.json.find("\"http\":true"), std::string::npos) << r.json;
  expect_schedule_kept(r, 200, 2, 10);
  EXPECT_GE(r.number("min_us"), 1000.0) << r.output;
  EXPECT_EQ(r.number("1000"), r.number("completed")) << r.output;
  EXPECT_EQ(r.number("http_errors"), 0) << r.output;
}

TEST_P(BenchClientRate, AStallCountsForEveryRequestScheduledDuringIt) {
  // 1,000 requests/s on 10 connections; about half a second in, the server stops for 200 ms.
  constexpr double kRate = 1000;
  constexpr int kConns = 10;
  StallingEchoServer server(500, 200ms);
  ASSERT_TRUE(server.listening());
  const Report r = run(server.port(), kConns, kRate, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_schedule_kept(r, kRate, 2, kConns);
  // A request due t ms into the stall is answered when it ends: it waited 200 - t ms. So the
  // requests of the stall's first 100 ms waited 100 ms or more: rate x 0.1 s of them, and
  // those of its first 190 ms, 10 ms or more. A client that timed from its own (late) sends
  // would show one slow request per connection: kConns.
  const double over_100ms = r.number("100000");
  EXPECT_GE(over_100ms, kRate * 0.1 * 0.75) << r.output;
  EXPECT_LE(over_100ms, kRate * 0.1 * 2 + kConns)
      << r.output;  // room for one hiccup of the machine
  EXPECT_GT(over_100ms, 5 * kConns) << r.output;
  EXPECT_GE(r.number("10000"), kRate * 0.19 * 0.75) << r.output;
  EXPECT_GE(r.number("max_us"), 190'000.0) << r.output;
}

TEST_P(BenchClientRate, AServerKeptOffItsCpuShowsItsRunQueueWait) {
  if (!std::filesystem::exists("/proc/self/task/" + std::to_string(::gettid()) + "/schedstat")) {
    GTEST_SKIP() << "no /proc/PID/task/TID/schedstat on this kernel";
  }
  ThreadedServer server(delayed_echo);
  ASSERT_TRUE(server.listening());
  // Two threads of this process (the "server" named by --server-pid) spin on one CPU for the
  // whole run: each waits while the other runs, so together they wait about as long as the
  // run lasts, whatever else the machine does.
  cpu_set_t one_cpu;
  CPU_ZERO(&one_cpu);
  CPU_SET(::sched_getcpu(), &one_cpu);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < 2; ++i) {
    spinners.emplace_back([&] {
      ::sched_setaffinity(0, sizeof one_cpu, &one_cpu);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const Report r = run(server.port(), 10, 200, 1, {"--server-pid", std::to_string(::getpid())});
  stop = true;
  for (auto& spinner : spinners) spinner.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(r.number("server_runqueue_wait_s"), 0.25) << r.output;
  EXPECT_GE(r.number("client_runqueue_wait_s"), 0.0) << r.output;
  // The hypervisor's share cannot be provoked from here; it is measured, never negative.
  EXPECT_GE(r.number("server_cpus_steal_s"), 0.0) << r.output;
  EXPECT_GE(r.number("client_cpus_steal_s"), 0.0) << r.output;
}

TEST_P(BenchClientRate, WithoutAServerPidTheServersShareIsNotMeasured) {
  ThreadedServer server(delayed_echo);
  ASSERT_TRUE(server.listening());
  const Report r = run(server.port(), 10, 200, 1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.number("server_runqueue_wait_s"), -1.0) << r.output;
  EXPECT_EQ(r.number("server_cpus_steal_s"), -1.0) << r.output;
  EXPECT_GE(r.number("client_runqueue_wait_s"), 0.0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(ClientBackends, BenchClientRate, ucp::test::kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
