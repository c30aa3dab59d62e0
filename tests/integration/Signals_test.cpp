// bin/proactor_test and the signals an operator sends (nginx's conventions): SIGUSR1 reopens
// the log file (logrotate), SIGHUP re-reads the config, applies what can change while running
// (log.level), reports the rest, and reopens the log file too; SIGUSR2 and SIGPIPE are
// ignored. None of them may kill the server. A second SIGINT/SIGTERM during a graceful stop
// stops at once, still with exit 0 and the log flushed.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Waits (bounded) until the file at `path` contains `needle`.
bool file_gets(const std::string& path, const std::string& needle, int64_t timeout_ms = 15000) {
  const Deadline deadline(timeout_ms);
  while (!deadline.expired()) {
    if (read_text(path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(5ms);
  }
  return read_text(path).find(needle) != std::string::npos;
}

/// One echo round trip on a fresh connection.
::testing::AssertionResult serves(uint16_t port) {
  auto fd = connect_loopback(port);
  if (!fd) return ::testing::AssertionFailure() << "connect: " << fd.error().message();
  const char message[] = "ping";
  char echoed[sizeof message];
  auto done = echo_round_trip(fd->get(), message, echoed, 5000);
  if (!done) return ::testing::AssertionFailure() << "echo: " << done.error().message();
  return ::testing::AssertionSuccess();
}

class Signals : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

TEST_F(Signals, HangupUser1User2AndPipeNeverKillTheServer) {
  ServerProcess server;
  UCP_START_SERVER(server);
  for (int signal : {SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGHUP, SIGUSR1}) {
    server.send_signal(signal);
    // The signal is handled on the main loop: once it is logged, the server must still run.
    std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(server.alive()) << strsignal(signal)
                                << " killed the server: " << server.exit_status()->describe()
                                << "\n"
                                << server.output_tail();
    EXPECT_TRUE(serves(server.port())) << "after " << strsignal(signal);
  }
  EXPECT_TRUE(server.wait_for_output("(SIGUSR2) ignored", 15000)) << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// logrotate's way: move the live file away, send SIGUSR1; the server writes on in a new file
// at the configured path, and the moved file keeps everything logged before.
TEST_F(Signals, User1ReopensTheLogFileAfterItWasMovedAway) {
  ServerProcess server;
  UCP_START_SERVER(server);
  const std::string log = server.dir() + "/server.log";
  const std::string rotated = log + ".1";
  ASSERT_TRUE(file_gets(log, "listening on")) << read_text(log);
  std::filesystem::rename(log, rotated);
  server.send_signal(SIGUSR1);
  ASSERT_TRUE(file_gets(log, "(SIGUSR1): log file reopened"))
      << "no new log file with the line at " << log << "\n"
      << server.output_tail();
  // New lines keep going to the new file; the old one is left alone.
  server.send_signal(SIGUSR2);
  EXPECT_TRUE(file_gets(log, "(SIGUSR2) ignored")) << read_text(log);
  const auto stopped = server.stop(SIGTERM);
  EXPECT_TRUE(stopped.clean()) << server.output_tail();
  EXPECT_TRUE(file_gets(log, "stopped cleanly", 1000)) << read_text(log);
  const std::string old_text = read_text(rotated);
  EXPECT_NE(old_text.find("listening on"), std::string::npos) << old_text;
  EXPECT_EQ(old_text.find("reopened"), std::string::npos) << old_text;
}

// SIGHUP: the config file (and the --set overrides) are read again; log.level takes effect at
// once, every other difference is reported as needing a restart, and the server goes on
// serving. A config that no longer loads is reported and the running one kept.
TEST_F(Signals, HangupRereadsTheConfigAppliesTheLogLevelAndReportsTheRest) {
  ServerProcess server;
  UCP_START_SERVER(server);
  const std::string config = server.dir() + "/test.conf";
  std::string text = read_text(config);
  const size_t at = text.find("level = INFO");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 12, "level = WARN");
  text += "[server]\nmax_connections = 5\n";
  std::ofstream(config, std::ios::trunc) << text;
  server.send_signal(SIGHUP);
  ASSERT_TRUE(server.wait_for_output("log.level: INFO -> WARN (applied)", 15000))
      << server.output_tail();
  EXPECT_TRUE(server.wait_for_output(
      "server.max_connections: 100000 -> 5 (takes effect at the next start)", 15000))
      << server.output_tail();
  EXPECT_TRUE(serves(server.port()));
  // WARN now: a SIGUSR2 (its line is INFO) leaves no line once the server has taken it.
  server.send_signal(SIGUSR2);
  for (int i = 0; i < 5000 && server.signal_pending(SIGUSR2); ++i) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_FALSE(server.signal_pending(SIGUSR2)) << "the server never took SIGUSR2";

  // A broken config: one ERROR line naming the problem; the server keeps its configuration.
  std::ofstream(config, std::ios::trunc) << "[server]\nport = 70000\n";
  server.send_signal(SIGHUP);
  EXPECT_TRUE(server.wait_for_output("server.port: 70000 is out of range", 15000))
      << server.output_tail();
  EXPECT_TRUE(server.wait_for_output("keeping the running configuration", 15000))
      << server.output_tail();
  ASSERT_TRUE(server.alive());
  EXPECT_TRUE(serves(server.port()));
  // The SIGUSR2 taken at WARN level, before the broken config, left no line.
  EXPECT_EQ(server.count_output_lines("(SIGUSR2) ignored"), 0u) << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

/// The bytes queued on the client's own socket: unread (received from the server) and unsent
/// (not yet taken by the server). Read from the client side so that nothing depends on how
/// /proc shows the server's socket (a container may hide it, the family may be IPv6).
std::pair<int, int> client_queues(int fd) {
  int unread = 0;
  int unsent = 0;
  ::ioctl(fd, SIOCINQ, &unread);
  ::ioctl(fd, SIOCOUTQ, &unsent);
  return {unread, unsent};
}

// A graceful stop waits for a connection whose peer never reads what the server writes, up to
// shutdown_timeout_ms (here a minute). The second SIGTERM cancels it at once: exit 0, and the
// log has the last line.
TEST_F(Signals, SecondSigtermDuringAGracefulStopStopsAtOnce) {
  ServerProcess server({"server.shutdown_timeout_ms=60000", "server.read_timeout_ms=0"});
  UCP_START_SERVER(server);
  // The small receive buffer is set before the handshake: shrunk afterwards, it makes the
  // client's kernel drop the server's segments, and with them the acknowledgements of the
  // client's own data, whose sending then backs off for seconds. The client's queues then
  // stand still while the server, its echo all in its socket buffer, just waits to read: a
  // graceful stop rightly ends such a connection at once, and the test looked at the wrong
  // thing (seen under load: server Recv-Q 0, Send-Q 282112 of 3939840, client 3.9 MB unsent).
  auto fd = connect_loopback(server.port(), 5000, /*receive_buffer=*/4096);
  ASSERT_TRUE(fd);
  // Echo data the client never reads until the server cannot go on: its write_all is stuck
  // with both sides' buffers full, and the graceful stop has to wait for it. Stuck means the
  // client's socket holds bytes it has not read and bytes the server has not taken, and
  // neither figure moves (a server still catching up would take more).
  // A send that makes no progress for a second ends the filling (a shorter pause may only be
  // the server waiting for the CPU on a loaded machine, with room left in its buffers).
  std::vector<char> chunk(64 * 1024, 'x');
  for (int i = 0; i < 1000 && send_all(fd->get(), chunk, 1000); ++i) {
  }
  std::pair<int, int> last{0, 0};
  int unchanged = 0;
  for (int i = 0; i < 500 && unchanged < 5; ++i) {
    std::this_thread::sleep_for(20ms);
    const auto now = client_queues(fd->get());
    const bool stuck = now.first > 0 && now.second > 0;
    unchanged = stuck && now == last ? unchanged + 1 : 0;
    last = now;
  }
  ASSERT_EQ(unchanged, 5) << "the server's socket never settled with unread and unsent bytes";
  server.send_signal(SIGTERM);
  ASSERT_TRUE(server.wait_for_output("shutting down: 1 connections open", 15000))
      << server.output_tail();
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(server.alive()) << "the graceful stop did not wait for the connection: "
                              << server.exit_status()->describe() << " (client queues "
                              << client_queues(fd->get()).first << " unread, "
                              << client_queues(fd->get()).second << " unsent)\n"
                              << server.output_tail();
  const auto status = server.stop(SIGTERM, 10000);  // a minute before the deadline
  EXPECT_TRUE(status.clean()) << status.describe() << "\n" << server.output_tail();
  EXPECT_TRUE(file_gets(server.dir() + "/server.log", "stopped cleanly", 1000))
      << read_text(server.dir() + "/server.log");
  EXPECT_EQ(server.count_output_lines("again: stopping at once"), 1u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
