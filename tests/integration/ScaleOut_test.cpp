// Scaling out on one host, and the stats line an operator watches while doing it, with
// bin/proactor_test processes on loopback:
// - two processes with server.reuse_port share one port, both serve, and one can stop while
//   the other goes on;
// - server.acceptors = per_worker in a process (each worker on its own SO_REUSEPORT socket),
//   and what it does with a socket passed by a service manager (one socket: the main loop
//   accepts, with a WARN);
// - log.stats_interval_ms: the stats line's counts add up to the traffic the test made.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "BackendProbe.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

#ifdef UCP_SANITIZER_BUILD
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

bool raise_fd_limit(rlim_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= wanted) return true;
  limit.rlim_cur = wanted;
  if (limit.rlim_max < wanted) limit.rlim_max = wanted;  // permitted as root
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

// The key=value fields of every "stats:" line a server logged. A last line without its
// newline is still being written (a count cut short would read as a smaller one): left for
// the next look.
std::vector<std::map<std::string, std::string>> stats_lines(const ServerProcess& server) {
  std::vector<std::map<std::string, std::string>> lines;
  std::istringstream in(server.output());
  for (std::string line; std::getline(in, line) && !in.eof();) {
    const size_t at = line.find("stats: ");
    if (at == std::string::npos) continue;
    std::map<std::string, std::string> fields;
    std::istringstream words(line.substr(at + 7));
    for (std::string word; words >> word;) {
      const size_t equals = word.find('=');
      if (equals != std::string::npos) fields[word.substr(0, equals)] = word.substr(equals + 1);
    }
    lines.push_back(std::move(fields));
  }
  return lines;
}

// The sum of one counter over all stats lines so far: the lines count intervals, so their
// sum is the total since start.
uint64_t stats_sum(const ServerProcess& server, const std::string& key) {
  uint64_t sum = 0;
  for (const auto& fields : stats_lines(server)) {
    auto it = fields.find(key);
    if (it != fields.end()) sum += std::stoull(it->second);
  }
  return sum;
}

// Waits (bounded) until the stats lines' sum of `key` reaches `expected`; returns the sum.
uint64_t wait_for_stats_sum(ServerProcess& server, const std::string& key, uint64_t expected,
                            int64_t timeout_ms = 30000) {
  const Deadline deadline(timeout_ms);
  uint64_t sum = stats_sum(server, key);
  while (sum < expected && !deadline.expired() && server.alive()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sum = stats_sum(server, key);
  }
  return sum;
}

// The first line of output holding `needle`, or "".
std::string first_line_with(const ServerProcess& server, const std::string& needle) {
  std::istringstream in(server.output());
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return {};
}

// `count` connections one after another, each echoing `size` bytes; returns how many echoed.
int echo_connections(uint16_t port, int count, size_t size) {
  int echoed = 0;
  std::string message(size, '\0');
  std::string scratch(size, '\0');
  for (int i = 0; i < count; ++i) {
    fill_pattern(message, static_cast<uint64_t>(i));
    auto connection = connect_loopback(port);
    if (!connection) continue;
    if (echo_round_trip(connection->get(), message, scratch)) ++echoed;
  }
  return echoed;
}

class ScaleOut : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ::signal(SIGPIPE, SIG_IGN);
  }
  std::vector<std::string> on_backend(std::vector<std::string> overrides) const {
    overrides.push_back("event_loop.backend=" + GetParam());
    return overrides;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, ScaleOut, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

// 2 processes x 1 worker on one port: the kernel spreads the connections over both
// processes' listening sockets (SO_REUSEPORT); when one stops, the other takes them all.
TEST_P(ScaleOut, TwoProcessesShareAPortWithReusePortAndBothServe) {
  const std::vector<std::string> common = {"server.reuse_port=true", "server.thread_num=1",
                                           "log.stats_interval_ms=100"};
  ServerProcess first(on_backend(common));
  UCP_START_SERVER(first);
  std::vector<std::string> same_port = common;
  same_port.push_back("server.port=" + std::to_string(first.port()));
  ServerProcess second(on_backend(same_port));
  UCP_START_SERVER(second);
  ASSERT_EQ(second.port(), first.port());

  constexpr int kConnections = 400;
  EXPECT_EQ(echo_connections(first.port(), kConnections, 64), kConnections);
  // Each process counts what it accepted; together they accepted every connection, and each
  // took a share (the kernel hashes the source port: one left empty is below 1e-100).
  const Deadline deadline(30000);
  uint64_t by_first = 0;
  uint64_t by_second = 0;
  while (by_first + by_second < kConnections && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    by_first = stats_sum(first, "accepted");
    by_second = stats_sum(second, "accepted");
  }
  EXPECT_EQ(by_first + by_second, static_cast<uint64_t>(kConnections))
      << first.output_tail() << second.output_tail();
  EXPECT_GT(by_first, 0u);
  EXPECT_GT(by_second, 0u);

  // One instance stops gracefully (as for a rolling restart); the other serves every new
  // connection on its own.
  EXPECT_TRUE(first.stop(SIGTERM).clean()) << first.output_tail();
  EXPECT_EQ(echo_connections(second.port(), 50, 64), 50);
  EXPECT_TRUE(second.stop(SIGTERM).clean()) << second.output_tail();
}

// server.acceptors = per_worker in a process: both workers accept (the stats line gives the
// split), and the startup line says how the server accepts.
TEST_P(ScaleOut, PerWorkerAcceptorsServeOnEveryWorker) {
  ServerProcess server(on_backend(
      {"server.acceptors=per_worker", "server.thread_num=2", "log.stats_interval_ms=100"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("acceptors: per_worker"), 1u) << server.output_tail();
  constexpr int kConnections = 300;
  EXPECT_EQ(echo_connections(server.port(), kConnections, 32), kConnections);
  EXPECT_EQ(wait_for_stats_sum(server, "accepted", kConnections), uint64_t{kConnections});
  uint64_t per_worker[2] = {0, 0};
  for (const auto& fields : stats_lines(server)) {
    const std::string& split = fields.at("accepted_per_worker");  // "A/B"
    const size_t slash = split.find('/');
    ASSERT_NE(slash, std::string::npos) << split;
    per_worker[0] += std::stoull(split.substr(0, slash));
    per_worker[1] += std::stoull(split.substr(slash + 1));
  }
  EXPECT_GT(per_worker[0], 0u);
  EXPECT_GT(per_worker[1], 0u);
  EXPECT_EQ(per_worker[0] + per_worker[1], uint64_t{kConnections});
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A socket passed by a service manager is one socket: it cannot become one per worker, so the
// server says so and the main loop accepts on it.
TEST_P(ScaleOut, PerWorkerAcceptorsWithAnInheritedSocketAcceptOnTheMainLoop) {
  UniqueFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_TRUE(socket);
  ASSERT_EQ(::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(socket.get(), 128), 0);
  ASSERT_EQ(::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  ServerProcess::Options options;
  options.overrides = on_backend({"server.acceptors=per_worker", "server.thread_num=2"});
  options.listen_fd = socket.get();
  ServerProcess server(options);
  UCP_START_SERVER(server);
  EXPECT_EQ(server.port(), ntohs(address.sin_port));
  const std::string warning = first_line_with(server, "cannot be split per worker");
  EXPECT_NE(warning.find("WARN"), std::string::npos) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("acceptors: per_worker"), 0u) << server.output_tail();
  EXPECT_EQ(echo_connections(server.port(), 20, 16), 20);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Out of descriptors with per-worker acceptors: each worker's acceptor backs off on its own
// (no busy loop, the warning rate-limited), and both accept again once descriptors are free.
TEST_P(ScaleOut, PerWorkerAcceptorsBackOffAtTheFdLimitAndRecover) {
  constexpr size_t kClients = 600;
  if (kSanitized) GTEST_SKIP() << "sanitizer runtimes need file descriptors the test takes away";
  if (!raise_fd_limit(kClients + 256)) GTEST_SKIP() << "RLIMIT_NOFILE cannot be raised";
  ServerProcess::Options options;
  options.nofile_limit = 256;
  options.overrides = on_backend(
      {"server.acceptors=per_worker", "server.thread_num=2", "server.read_timeout_ms=0"});
  ServerProcess server(options);
  UCP_START_SERVER(server);
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < kClients; ++i) {
    auto fd = connect_loopback(server.port(), 5000);
    if (!fd) break;  // a full listen backlog is the kernel's limit, not a failure
    clients.push_back(std::move(*fd));
  }
  ASSERT_GE(clients.size(), 300u) << "too few connections to exhaust 256 descriptors";
  // The acceptors hit EMFILE and say so (bounded: with 300+ connections waiting they must).
  ASSERT_TRUE(server.wait_for_output("pausing accepts", 10000)) << server.output_tail();
  ASSERT_TRUE(server.alive()) << server.output_tail();
  const double cpu_before = server.cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double cpu_used = server.cpu_seconds() - cpu_before;
  EXPECT_LT(cpu_used, 1.0) << "server burned " << cpu_used << " s of CPU in 2 s at the fd limit";
  EXPECT_LE(server.fd_count(), 256);
  EXPECT_LT(server.count_output_lines(""), 2000u) << "the accept error is not rate-limited";
  EXPECT_GE(server.count_output_lines("pausing accepts"), 1u) << server.output_tail();
  clients.clear();
  // Accepting resumes once descriptors are free (after the back-off and the backlog drains).
  EXPECT_EQ(echo_connections(server.port(), 100, 16), 100) << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// log.stats_interval_ms: after known echo traffic the lines add up to it exactly: 30
// connections of which 10 stay open, 1,000 bytes each way on every one.
TEST_P(ScaleOut, StatsLineCountsConnectionsAndBytesOfEchoTraffic) {
  ServerProcess server(on_backend({"log.stats_interval_ms=100", "server.thread_num=2"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(echo_connections(server.port(), 20, 1000), 20);
  std::vector<UniqueFd> held;
  std::string message(1000, '\0');
  std::string scratch(1000, '\0');
  for (int i = 0; i < 10; ++i) {
    auto connection = connect_loopback(server.port());
    ASSERT_TRUE(connection) << connection.error().message();
    fill_pattern(message, 100 + static_cast<uint64_t>(i));
    ASSERT_TRUE(echo_round_trip(connection->get(), message, scratch));
    held.push_back(std::move(*connection));
  }
  EXPECT_EQ(wait_for_stats_sum(server, "accepted", 30), 30u) << server.output_tail();
  EXPECT_EQ(wait_for_stats_sum(server, "bytes_in", 30000), 30000u) << server.output_tail();
  EXPECT_EQ(wait_for_stats_sum(server, "bytes_out", 30000), 30000u) << server.output_tail();
  // The 20 closed connections leave the open count once their worker has seen the close,
  // which may come a line or two after the bytes were counted.
  auto lines = stats_lines(server);
  for (const Deadline deadline(30000);
       (lines.empty() || lines.back().at("open") != "10") && !deadline.expired();) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    lines = stats_lines(server);
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().at("open"), "10") << server.output_tail();
  // A line covers whole intervals: one, or several when the main loop was too busy to log on
  // time (it counts the ticks it missed).
  for (const auto& fields : lines) {
    const uint64_t interval = std::stoull(fields.at("interval_ms"));
    EXPECT_TRUE(interval > 0 && interval % 100 == 0) << "interval_ms=" << interval;
  }
  EXPECT_EQ(stats_sum(server, "rejected"), 0u);
  EXPECT_EQ(stats_sum(server, "rejected_submissions"), 0u);
  EXPECT_EQ(stats_sum(server, "cq_overflows"), 0u);
  EXPECT_GT(stats_sum(server, "submit_calls"), 0u);
  EXPECT_EQ(lines.back().count("requests"), 0u) << "echo counts no requests";
  held.clear();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Over the HTTP layer the line also counts the requests answered.
TEST_P(ScaleOut, StatsLineCountsHttpRequests) {
  ServerProcess server(on_backend({"log.stats_interval_ms=100", "server.protocol=http"}));
  UCP_START_SERVER(server);
  constexpr int kRequests = 25;
  auto connection = connect_loopback(server.port());
  ASSERT_TRUE(connection) << connection.error().message();
  std::string pending;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(send_text(connection->get(), "GET / HTTP/1.1\r\nHost: test\r\n\r\n"));
    auto reply = read_response(connection->get(), pending, 5000);
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_EQ(reply->status, 200);
  }
  EXPECT_EQ(wait_for_stats_sum(server, "requests", kRequests), uint64_t{kRequests})
      << server.output_tail();
  EXPECT_EQ(stats_sum(server, "accepted"), 1u);
  EXPECT_GT(stats_sum(server, "bytes_in"), 0u);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Off by default: no line.
TEST_P(ScaleOut, NoStatsLineByDefault) {
  ServerProcess server(on_backend({}));
  UCP_START_SERVER(server);
  EXPECT_EQ(echo_connections(server.port(), 5, 16), 5);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("stats: "), 0u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
