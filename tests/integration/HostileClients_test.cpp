// Hostile and broken echo clients against bin/proactor_test (issue 5): the server must stay up,
// keep serving everyone else, lose no byte and hold its memory and descriptors bounded.
//
// Each test starts its own server on a free loopback port (tests/support/ServerProcess.h) and
// bounds every wait. Sizes are scaled for `make test` on a 2-core machine, under ASan too;
// UCP_STRESS=1 raises them to the issue's full figures (10,000 connections, 50,000 churn
// cycles). Figures worth keeping (RSS per connection, bytes buffered) are printed and recorded
// as test properties. No assertion depends on wall-clock speed; only on correctness bounds.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "BackendProbe.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

#ifdef UCP_SANITIZER_BUILD
constexpr bool kSanitized = true;  // ASan quarantine and shadow memory inflate RSS figures
#else
constexpr bool kSanitized = false;
#endif

bool stress() {
  const char* value = std::getenv("UCP_STRESS");
  return value != nullptr && std::string(value) == "1";
}

/// Raises this process's RLIMIT_NOFILE soft limit to at least `wanted` (children inherit it).
/// False when the hard limit is lower and cannot be raised.
bool raise_fd_limit(rlim_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= wanted) return true;
  if (limit.rlim_max < wanted) {
    rlimit raised{wanted, wanted};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return true;  // permitted (root)
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    return false;
  }
  limit.rlim_cur = wanted;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

/// One echo round trip of a small message on a fresh connection: the server still serves.
::testing::AssertionResult served(uint16_t port, size_t size = 4096, int64_t timeout_ms = 10000) {
  auto fd = connect_loopback(port, timeout_ms);
  if (!fd) return ::testing::AssertionFailure() << "connect: " << fd.error().message();
  std::vector<char> out(size);
  std::vector<char> in(size);
  fill_pattern(out, 4242);
  if (auto done = echo_round_trip(fd->get(), out, in, timeout_ms); !done) {
    return ::testing::AssertionFailure() << "round trip: " << done.error().message();
  }
  return ::testing::AssertionSuccess();
}

void report(const std::string& key, int64_t value) {
  ::testing::Test::RecordProperty(key, std::to_string(value));
  std::printf("[ figure   ] %s = %lld\n", key.c_str(), static_cast<long long>(value));
}

/// Drives `connections` echo connections in one poll loop, each in lockstep (send a message of
/// 1..max_message bytes, read the echo, compare, next) for `rounds` messages. Returns an empty
/// string on success, else what went wrong.
std::string run_echo_load(uint16_t port, size_t connections, uint64_t rounds, size_t max_message,
                          int64_t stall_timeout_ms = 15000) {
  struct Conn {
    UniqueFd fd;
    uint64_t round = 0;
    uint64_t offset = 0;
    size_t size = 0;
    size_t sent = 0;
    size_t got = 0;
    std::vector<char> out;
    std::vector<char> in;
  };
  std::vector<Conn> conns(connections);
  auto begin = [&](Conn& c, size_t index) {
    c.size = 1 + (c.round * 7919 + index * 104729) % max_message;
    c.sent = 0;
    c.got = 0;
    fill_pattern(std::span<char>(c.out.data(), c.size), 7000 + index, c.offset);
  };
  for (size_t i = 0; i < connections; ++i) {
    auto fd = connect_loopback(port);
    if (!fd) return "connect #" + std::to_string(i) + ": " + fd.error().message();
    conns[i].fd = std::move(*fd);
    conns[i].out.resize(max_message);
    conns[i].in.resize(max_message);
    begin(conns[i], i);
  }
  std::vector<pollfd> fds(connections);
  size_t finished = 0;
  while (finished < connections) {
    for (size_t i = 0; i < connections; ++i) {
      fds[i].fd = conns[i].round < rounds ? conns[i].fd.get() : -1;
      fds[i].events = conns[i].sent < conns[i].size ? POLLOUT | POLLIN : POLLIN;
      fds[i].revents = 0;
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(stall_timeout_ms));
    if (ready == 0) {
      return std::to_string(connections - finished) + " connections made no progress for " +
             std::to_string(stall_timeout_ms) + " ms";
    }
    if (ready < 0) continue;
    for (size_t i = 0; i < connections; ++i) {
      Conn& c = conns[i];
      if (fds[i].revents == 0) continue;
      if (c.sent < c.size && (fds[i].revents & POLLOUT) != 0) {
        const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.size - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN) return "send: " + std::string(std::strerror(errno));
        if (n > 0) c.sent += static_cast<size_t>(n);
      }
      if ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
      const ssize_t n = ::recv(c.fd.get(), c.in.data() + c.got, c.size - c.got, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        return "connection " + std::to_string(i) + " round " + std::to_string(c.round) + ": " +
               (n == 0 ? std::string("closed by the server") : std::strerror(errno));
      }
      if (n < 0) continue;
      c.got += static_cast<size_t>(n);
      if (c.got < c.size) continue;
      if (std::memcmp(c.in.data(), c.out.data(), c.size) != 0) {
        return "connection " + std::to_string(i) + " round " + std::to_string(c.round) +
               ": echoed bytes differ";
      }
      c.offset += c.size;
      if (++c.round == rounds) {
        ++finished;
      } else {
        begin(c, i);
      }
    }
  }
  return {};
}

/// Polls `probe` until it returns at most `expected` or `timeout_ms` passes; returns the last
/// value (connections close asynchronously, so a count falls back to its baseline over time).
template <class Probe>
int64_t settle(Probe probe, int64_t expected, int64_t timeout_ms) {
  const Deadline deadline(timeout_ms);
  int64_t value = probe();
  while (value > expected && !deadline.expired()) {
    std::this_thread::sleep_for(20ms);
    value = probe();
  }
  return value;
}

// Every test runs bin/proactor_test on io_uring and on epoll (event_loop.backend).
class HostileClients : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ::signal(SIGPIPE, SIG_IGN);  // our sends use MSG_NOSIGNAL anyway
  }
  /// `overrides` plus the backend under test.
  std::vector<std::string> on_backend(std::vector<std::string> overrides) const {
    overrides.push_back("event_loop.backend=" + GetParam());
    return overrides;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, HostileClients, test::kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

// -------------------------------------------------------------------------------------------
// A client that sends without reading: the server must stop reading it (max_output_bytes)
// instead of buffering everything, keep serving others, and deliver every byte in order once
// the client reads.

TEST_P(HostileClients, NeverReadingClientIsBoundedAndGetsEveryByteInOrder) {
  const uint64_t total = (kSanitized ? 16ULL : 64ULL) << 20;
  constexpr int64_t kRssBoundKb = 64 * 1024;  // server growth allowed above its baseline
  ServerProcess server(on_backend({"server.max_output_bytes=4194304"}));
  UCP_START_SERVER(server);
  ASSERT_TRUE(served(server.port()));
  const int64_t baseline_kb = server.rss_kb();

  auto hog = connect_loopback(server.port());
  ASSERT_TRUE(hog) << hog.error().message();
  // Phase 1: push until the server stops taking bytes (no progress for 1 s), never reading.
  constexpr size_t kChunk = 256 * 1024;
  std::vector<char> chunk(kChunk);
  uint64_t sent = 0;
  const Deadline phase1(30000);
  while (sent < total && !phase1.expired()) {
    if (!wait_for(hog->get(), POLLOUT, Deadline(1000))) break;  // back-pressure reached
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total - sent));
    fill_pattern(std::span<char>(chunk.data(), n), 1, sent);
    const ssize_t w = ::send(hog->get(), chunk.data(), n, MSG_NOSIGNAL);
    ASSERT_TRUE(w > 0 || errno == EAGAIN) << std::strerror(errno);
    if (w > 0) sent += static_cast<uint64_t>(w);
  }
  const int64_t stalled_kb = server.rss_kb();
  report("never_reading_accepted_before_stall_bytes", static_cast<int64_t>(sent));
  report("never_reading_rss_growth_kb", stalled_kb - baseline_kb);
  EXPECT_LT(sent, total) << "the server took all " << total << " bytes without the client reading";
  EXPECT_LT(stalled_kb - baseline_kb, kRssBoundKb)
      << "server RSS grew from " << baseline_kb << " KiB to " << stalled_kb << " KiB";

  // Everyone else is still served while the hog is stuck.
  EXPECT_TRUE(served(server.port(), 65536));
  EXPECT_TRUE(run_echo_load(server.port(), 10, 20, 4096).empty());

  // Phase 2: read everything back in order while sending the rest.
  std::vector<char> in(kChunk);
  uint64_t got = 0;
  const Deadline phase2(120000);
  while (got < total) {
    ASSERT_FALSE(phase2.expired()) << "only " << got << " of " << total << " bytes echoed";
    pollfd p{hog->get(), POLLIN, 0};
    if (sent < total) p.events |= POLLOUT;
    ASSERT_GT(::poll(&p, 1, 10000), 0) << "no progress for 10 s at " << got << " bytes echoed";
    if ((p.revents & POLLOUT) != 0 && sent < total) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total - sent));
      fill_pattern(std::span<char>(chunk.data(), n), 1, sent);
      const ssize_t w = ::send(hog->get(), chunk.data(), n, MSG_NOSIGNAL);
      ASSERT_TRUE(w > 0 || errno == EAGAIN) << std::strerror(errno);
      if (w > 0) sent += static_cast<uint64_t>(w);
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t r = ::recv(hog->get(), in.data(), in.size(), 0);
      ASSERT_NE(r, 0) << "server closed the connection after " << got << " bytes";
      if (r < 0) {
        ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
        continue;
      }
      const size_t at = first_pattern_mismatch(std::span<const char>(in.data(), size_t(r)), 1, got);
      ASSERT_EQ(at, std::string::npos) << "byte " << got + at << " differs";
      got += static_cast<uint64_t>(r);
    }
  }
  const int64_t peak_kb = server.peak_rss_kb();
  report("never_reading_peak_rss_growth_kb", peak_kb - baseline_kb);
  if (!kSanitized) {
    EXPECT_LT(peak_kb - baseline_kb, kRssBoundKb);
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// Many concurrent connections: all served; memory per idle connection reported.

TEST_P(HostileClients, ManyConcurrentConnectionsAreAllServed) {
  const size_t connections = stress() ? 10000 : 2000;
  // This process and the server (which inherits the limit) each hold one end of every
  // connection, in separate descriptor tables.
  if (!raise_fd_limit(connections + 256)) {
    GTEST_SKIP() << "RLIMIT_NOFILE cannot be raised to " << connections + 256;
  }
  ServerProcess server(on_backend({"server.read_timeout_ms=0"}));
  UCP_START_SERVER(server);
  ASSERT_TRUE(served(server.port()));
  const int64_t baseline_kb = server.rss_kb();
  const int64_t baseline_fds = server.fd_count();

  std::vector<UniqueFd> clients;
  clients.reserve(connections);
  char out[64];
  char in[64];
  for (size_t i = 0; i < connections; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd) << "connect #" << i << ": " << fd.error().message();
    clients.push_back(std::move(*fd));
  }
  // Every connection is served (one round trip each, in a second pass so that all are open).
  for (size_t i = 0; i < connections; ++i) {
    fill_pattern(out, i);
    auto done = echo_round_trip(clients[i].get(), out, in);
    ASSERT_TRUE(done) << "connection #" << i << ": " << done.error().message();
  }
  // Only reported: a server using io_uring direct descriptors holds none of them in /proc.
  report("fds_for_connections", server.fd_count() - baseline_fds);
  const int64_t loaded_kb = server.rss_kb();
  const int64_t per_connection_bytes =
      (loaded_kb - baseline_kb) * 1024 / static_cast<int64_t>(connections);
  report("concurrent_connections", static_cast<int64_t>(connections));
  report("rss_growth_kb", loaded_kb - baseline_kb);
  report("rss_per_idle_connection_bytes", per_connection_bytes);
  // A second round on every connection after they all sat idle together.
  for (size_t i = 0; i < connections; i += 7) {
    fill_pattern(out, i + 1);
    auto done = echo_round_trip(clients[i].get(), out, in);
    ASSERT_TRUE(done) << "connection #" << i << " (second round): " << done.error().message();
  }
  clients.clear();
  EXPECT_LE(settle([&] { return server.fd_count(); }, baseline_fds, 10000), baseline_fds);
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// A burst of connections larger than the ring (1,000 with ring_entries = 256): their receives
// wait in the pending queue, and every one must reach the kernel without other traffic
// making the loop go round again.
TEST_P(HostileClients, BurstOfConnectionsLargerThanTheRingIsServedAtOnce) {
  constexpr size_t kConnections = 1000;
  if (!raise_fd_limit(kConnections + 256)) GTEST_SKIP() << "RLIMIT_NOFILE cannot be raised";
  ServerProcess server(on_backend({"event_loop.ring_entries=256", "server.read_timeout_ms=0"}));
  UCP_START_SERVER(server);
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < kConnections; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd) << "connect #" << i << ": " << fd.error().message();
    clients.push_back(std::move(*fd));
  }
  char out[16];
  char in[16];
  fill_pattern(out, 99);
  // One connection at a time, nothing else moving: each must be answered on its own. (A receive
  // stuck in the pending queue is never answered: nothing else would make the loop go round.)
  for (size_t i = 0; i < 10; ++i) {
    auto done = echo_round_trip(clients[i].get(), out, in, 15000);
    EXPECT_TRUE(done) << "connection #" << i << ": " << done.error().message();
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// fd exhaustion: RLIMIT_NOFILE 256 and 600 connectors. No crash, no busy loop, accepts again
// once descriptors are free.

TEST_P(HostileClients, FdExhaustionNeitherCrashesNorSpinsAndRecovers) {
  constexpr size_t kClients = 600;
  if (kSanitized) {
    // UBSan's vptr check probes memory through a pipe; with no descriptor left it reports every
    // virtual call (std::error_category) as "invalid vptr" and halts: a false positive.
    GTEST_SKIP() << "sanitizer runtimes need file descriptors the test takes away";
  }
  if (!raise_fd_limit(kClients + 256)) GTEST_SKIP() << "RLIMIT_NOFILE cannot be raised";
  ServerProcess::Options options;
  options.nofile_limit = 256;
  options.overrides = on_backend({"server.read_timeout_ms=0"});
  ServerProcess server(options);
  UCP_START_SERVER(server);
  ASSERT_TRUE(served(server.port()));

  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < kClients; ++i) {
    auto fd = connect_loopback(server.port(), 5000);
    if (!fd) break;  // the listen backlog may fill: that is the kernel's limit, not a failure
    clients.push_back(std::move(*fd));
  }
  report("fd_exhaustion_clients_connected", static_cast<int64_t>(clients.size()));
  ASSERT_GE(clients.size(), 300u) << "too few connections to exhaust 256 descriptors";
  // The server hits EMFILE and says so (bounded: it must, with 300+ connections waiting).
  ASSERT_TRUE(server.wait_for_output("pausing accepts", 10000)) << server.output_tail();
  ASSERT_TRUE(server.alive()) << server.exit_status()->describe() << "\n" << server.output_tail();
  const double cpu_before = server.cpu_seconds();
  std::this_thread::sleep_for(2s);
  const double cpu_used = server.cpu_seconds() - cpu_before;
  report("fd_exhaustion_cpu_ms_over_2s", static_cast<int64_t>(cpu_used * 1000));
  EXPECT_LT(cpu_used, 1.0) << "server burned " << cpu_used << " s of CPU in 2 s at the fd limit";
  EXPECT_LE(server.fd_count(), 256);
  const size_t log_lines = server.count_output_lines("");  // every line
  report("fd_exhaustion_output_lines", static_cast<int64_t>(log_lines));
  EXPECT_LT(log_lines, 2000u) << "the accept error is not rate-limited";
  ASSERT_TRUE(server.alive());

  // The connections the server did accept are served.
  char out[32];
  char in[32];
  fill_pattern(out, 3);
  EXPECT_TRUE(echo_round_trip(clients.front().get(), out, in, 5000));

  clients.clear();
  // Accepting resumes once descriptors are free (after any back-off and the backlog drains).
  EXPECT_TRUE(served(server.port(), 4096, 15000)) << server.output_tail();
  EXPECT_TRUE(run_echo_load(server.port(), 50, 10, 1024).empty());
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// max_connections: connections beyond the limit are closed at once; capacity returns when a
// held connection goes.

TEST_P(HostileClients, ConnectionsBeyondMaxConnectionsAreClosedAndCapacityReturns) {
  constexpr size_t kLimit = 5;
  ServerProcess server(on_backend({"server.max_connections=5", "server.read_timeout_ms=0"}));
  UCP_START_SERVER(server);
  std::vector<UniqueFd> held;
  char out[16];
  char in[16];
  fill_pattern(out, 8);
  for (size_t i = 0; i < kLimit; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd);
    ASSERT_TRUE(echo_round_trip(fd->get(), out, in)) << "connection " << i << " of " << kLimit;
    held.push_back(std::move(*fd));
  }
  for (int extra = 0; extra < 3; ++extra) {
    auto fd = connect_loopback(server.port());  // the kernel completes the handshake
    ASSERT_TRUE(fd);
    (void)send_all(fd->get(), out);
    auto closed = drain_until_closed(fd->get(), 15000);
    ASSERT_TRUE(closed) << "connection over the limit still open: " << closed.error().message();
    EXPECT_EQ(*closed, 0u) << "connection over the limit was served";
  }
  held.pop_back();
  // The server learns of the close asynchronously: retry (a connection it still counted over
  // the limit is closed at once, so a failed attempt ends long before its deadline).
  bool served_again = false;
  const Deadline deadline(30000);
  while (!served_again && !deadline.expired()) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd);
    served_again = static_cast<bool>(echo_round_trip(fd->get(), out, in, 10000));
    if (!served_again) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(served_again) << "no capacity after a held connection closed";
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  // After the exit: the logger writes asynchronously.
  EXPECT_GE(server.count_output_lines("max_connections"), 1u) << "the limit is not logged";
}

// -------------------------------------------------------------------------------------------
// Connection churn: connect/close cycles leave no descriptor behind and little memory.

TEST_P(HostileClients, ConnectionChurnLeaksNeitherFdsNorMemory) {
  const size_t cycles = stress() ? 50000 : 5000;
  // Receive buffers are mapped at start but become resident only as the loop's working set
  // grows; the warm-up below reaches that working set, so growth after it means a leak.
  ServerProcess server(on_backend({}));
  UCP_START_SERVER(server);
  char out[100];
  char in[100];
  fill_pattern(out, 11);
  auto cycle = [&](size_t i) -> ::testing::AssertionResult {
    auto fd = connect_loopback(server.port());
    if (!fd)
      return ::testing::AssertionFailure() << "connect #" << i << ": " << fd.error().message();
    switch (i % 4) {
      case 0:  // served, then an orderly close
      case 1: {
        auto done = echo_round_trip(fd->get(), std::span<const char>(out, 1 + i % 100), in);
        if (!done)
          return ::testing::AssertionFailure() << "cycle " << i << ": " << done.error().message();
        break;
      }
      case 2:  // data sent, reset before reading the echo
        (void)send_text(fd->get(), std::string_view(out, 50));
        break;
      default:  // connect and leave at once
        break;
    }
    // Mostly RST: a FIN close leaves TIME_WAIT behind and 50,000 would use up ephemeral ports.
    if (i % 8 != 0) set_reset_on_close(fd->get());
    return ::testing::AssertionSuccess();
  };
  for (size_t i = 0; i < 500; ++i) ASSERT_TRUE(cycle(i));  // warm-up: pools reach steady state
  ASSERT_TRUE(served(server.port()));
  std::this_thread::sleep_for(200ms);  // the server finishes closing the warm-up connections
  const int64_t fds_before = server.fd_count();
  const int64_t rss_before = server.rss_kb();
  for (size_t i = 0; i < cycles; ++i) ASSERT_TRUE(cycle(i));
  ASSERT_TRUE(served(server.port()));
  const int64_t fds_after = settle([&] { return server.fd_count(); }, fds_before, 10000);
  const int64_t rss_after = server.rss_kb();
  report("churn_cycles", static_cast<int64_t>(cycles));
  report("churn_fds_before", fds_before);
  report("churn_fds_after", fds_after);
  report("churn_rss_growth_kb", rss_after - rss_before);
  EXPECT_LE(fds_after, fds_before);
  EXPECT_LT(rss_after - rss_before, kSanitized ? 256 * 1024 : 8 * 1024);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// A client that stops reading and just holds its connection: server.write_timeout_ms closes it
// once the peer has taken no byte for that long (the echo handler's write_all fails with
// timed_out), whatever the read timeout says. The server's own stats line (every 100 ms) says
// when it has let go: the client may not hear it before reading, as the FIN waits behind the
// unread bytes unless the server still held bytes of the client's (then an RST comes at once).

TEST_P(HostileClients, PeerThatStopsReadingIsClosedAfterTheWriteTimeout) {
  ServerProcess server(on_backend(
      {"server.write_timeout_ms=300", "server.read_timeout_ms=0", "log.stats_interval_ms=100"}));
  UCP_START_SERVER(server);
  auto hog = connect_loopback(server.port());
  ASSERT_TRUE(hog) << hog.error().message();
  // The client's receive buffer stays as the kernel sizes it: a tiny one makes loopback drop
  // the server's large segments, and TCP's retransmission back-off can then hold the client's
  // own bytes for seconds while the server, its echo written, waits to read (no write stalls).
  // Send until neither socket buffer takes more (no progress for 1 s), never reading.
  std::vector<char> chunk(256 * 1024);
  fill_pattern(chunk, 7);
  uint64_t sent = 0;
  const Deadline filling(30000);
  while (!filling.expired()) {
    pollfd p{hog->get(), POLLOUT | POLLRDHUP, 0};
    if (::poll(&p, 1, 1000) <= 0 || (p.revents & POLLOUT) == 0) break;
    const ssize_t w = ::send(hog->get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN) break;  // already closed: checked below
    if (w > 0) sent += static_cast<uint64_t>(w);
  }
  report("write_timeout_sent_before_stall_bytes", static_cast<int64_t>(sent));
  ASSERT_GT(sent, 0u);
  // A stats line written after the stall with no connection open: the server closed it while
  // the client read nothing.
  const size_t stalled_at = server.output().size();
  bool let_go = false;
  for (const Deadline waiting(20000); !let_go && !waiting.expired();) {
    std::this_thread::sleep_for(50ms);
    let_go = server.output().find(" open=0 ", stalled_at) != std::string::npos;
  }
  EXPECT_TRUE(let_go) << "the stalled connection was still open after 20 s\n"
                      << server.output_tail();
  // The client sees the close once it reads what was already on its way (or at once: RST).
  auto rest = drain_until_closed(hog->get(), 20000);
  EXPECT_TRUE(rest) << rest.error().message();
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// Peers that vanish while the server writes to them: SIGPIPE must never kill it.

TEST_P(HostileClients, ResetAndCloseWhileServerWritesNeverKillIt) {
  ServerProcess server(on_backend({}));
  UCP_START_SERVER(server);
  std::vector<char> big(4u << 20);
  fill_pattern(big, 21);
  char head[4096];
  for (int round = 0; round < 20; ++round) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd) << fd.error().message();
    // Fill both directions so the server is in the middle of a write, read a little, then go.
    size_t sent = 0;
    while (sent < big.size() && wait_for(fd->get(), POLLOUT, Deadline(300))) {
      const ssize_t n = ::send(fd->get(), big.data() + sent, big.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    auto n = recv_some(fd->get(), head, 10000);
    ASSERT_TRUE(n && *n > 0) << "round " << round << ": nothing echoed";
    if (round % 2 == 0) {
      set_reset_on_close(fd->get());  // RST mid-write
    } else {
      ::shutdown(fd->get(), SHUT_RDWR);  // FIN while the server still has bytes to send
    }
    fd->reset();
    ASSERT_TRUE(server.alive()) << "round " << round << ": " << server.exit_status()->describe();
  }
  // The server writes into the dead sockets for a while yet: give it time to hit EPIPE.
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(server.alive()) << server.exit_status()->describe() << "\n" << server.output_tail();
  EXPECT_TRUE(served(server.port(), 1u << 20));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// -------------------------------------------------------------------------------------------
// SQ pressure and CQ overflow: an 8-entry ring with 200 busy connections loses nothing (on
// epoll, where ring_entries does not apply, the same load with and without multishot receive).

TEST_P(HostileClients, TinyRingEchoesEveryByte) {
  for (const char* multishot : {"true", "false"}) {
    SCOPED_TRACE(std::string("event_loop.multishot_recv=") + multishot);
    ServerProcess server(on_backend(
        {"event_loop.ring_entries=8", std::string("event_loop.multishot_recv=") + multishot}));
    UCP_START_SERVER(server);
    const std::string failure = run_echo_load(server.port(), 200, kSanitized ? 20 : 50, 16384);
    EXPECT_EQ(failure, "") << server.output_tail();
    EXPECT_TRUE(server.alive());
    EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  }
}

// -------------------------------------------------------------------------------------------
// SIGTERM with 100 active connections: exit 0, and every echo the server started is whole.

TEST_P(HostileClients, GracefulShutdownUnderLoadTruncatesNoEcho) {
  constexpr size_t kConnections = 100;
  constexpr size_t kMessage = 1000;  // one segment on loopback: read whole or not at all
  ServerProcess server(on_backend({"server.shutdown_timeout_ms=5000"}));
  UCP_START_SERVER(server);
  struct Conn {
    UniqueFd fd;
    uint64_t offset = 0;  // stream offset of the message in flight
    size_t sent = 0;
    size_t got = 0;
    bool closed = false;
    char out[kMessage];
    char in[kMessage];
  };
  std::vector<Conn> conns(kConnections);
  for (size_t i = 0; i < kConnections; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd) << fd.error().message();
    conns[i].fd = std::move(*fd);
    fill_pattern(conns[i].out, 500 + i, 0);
  }
  uint64_t messages = 0;
  bool stopping = false;
  size_t closed = 0;
  std::vector<pollfd> fds(kConnections);
  const Deadline deadline(60000);
  const auto signal_at = Clock::now() + 1s;
  while (closed < kConnections) {
    ASSERT_FALSE(deadline.expired()) << kConnections - closed << " connections never closed";
    if (!stopping && Clock::now() >= signal_at) {
      ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
      stopping = true;
    }
    for (size_t i = 0; i < kConnections; ++i) {
      const Conn& c = conns[i];
      fds[i].fd = c.closed ? -1 : c.fd.get();
      fds[i].events = c.sent < kMessage ? POLLOUT | POLLIN : POLLIN;
      fds[i].revents = 0;
    }
    ASSERT_GE(::poll(fds.data(), fds.size(), 10000), 0);
    for (size_t i = 0; i < kConnections; ++i) {
      Conn& c = conns[i];
      if (fds[i].revents == 0 || c.closed) continue;
      if (c.sent < kMessage && (fds[i].revents & POLLOUT) != 0) {
        const ssize_t n = ::send(c.fd.get(), c.out + c.sent, kMessage - c.sent, MSG_NOSIGNAL);
        if (n > 0) c.sent += static_cast<size_t>(n);
      }
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::recv(c.fd.get(), c.in + c.got, kMessage - c.got, 0);
      if (n < 0 && errno == EAGAIN) continue;
      if (n <= 0) {
        // Closed by the server: only between messages, never within an echo it started.
        ASSERT_TRUE(stopping) << "connection " << i << " closed before SIGTERM";
        EXPECT_EQ(c.got, 0u) << "connection " << i << ": echo truncated at " << c.got << " of "
                             << kMessage << " bytes";
        c.closed = true;
        ++closed;
        continue;
      }
      c.got += static_cast<size_t>(n);
      if (c.got < kMessage) continue;
      ASSERT_EQ(std::memcmp(c.in, c.out, kMessage), 0) << "connection " << i << ": bytes differ";
      ++messages;
      c.offset += kMessage;
      c.got = 0;
      // After SIGTERM the client keeps talking: the server decides when to close.
      c.sent = 0;
      fill_pattern(c.out, 500 + i, c.offset);
    }
  }
  report("shutdown_messages_echoed", static_cast<int64_t>(messages));
  const ExitStatus status = server.stop(SIGTERM, 15000);
  EXPECT_TRUE(status.clean()) << status.describe() << "\n" << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
