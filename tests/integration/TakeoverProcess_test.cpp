// Zero-downtime restart: a new bin/http_server (or bin/proactor_test) started with --takeover
// PATH receives the running server's listening sockets over server.takeover_socket, serves on
// them, and the old process stops accepting, drains and exits 0. wrk keeps a load on the port
// across the restart and must count no failed request; afterwards the new pid holds the
// socket and answers.

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "BackendProbe.h"
#include "Command.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

/// A scratch directory (document root, takeover socket), removed at the end.
class Scratch {
 public:
  Scratch() {
    char dir_template[] = "/tmp/ucp-takeover-XXXXXX";
    if (::mkdtemp(dir_template) != nullptr) dir_ = dir_template;
    std::filesystem::create_directories(dir_ + "/www");
    std::ofstream(dir_ + "/www/index.html") << "<h1>index</h1>\n";
  }
  ~Scratch() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

/// Each case runs on io_uring and on epoll: the takeover protocol runs on the main loop.
class TakeoverProcess : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }
  ServerProcess::Options http_server(const Scratch& scratch,
                                     std::vector<std::string> arguments = {},
                                     std::vector<std::string> more = {}) const;
};

INSTANTIATE_TEST_SUITE_P(Backends, TakeoverProcess, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

ServerProcess::Options TakeoverProcess::http_server(const Scratch& scratch,
                                                    std::vector<std::string> arguments,
                                                    std::vector<std::string> more) const {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"http.root=" + scratch.path("www"), "server.thread_num=2",
                       "server.takeover_socket=" + scratch.path("takeover.sock"),
                       "event_loop.backend=" + GetParam()};
  for (auto& o : more) options.overrides.push_back(std::move(o));
  options.arguments = std::move(arguments);
  return options;
}

/// One echo of a short message on `fd`.
bool echoes(int fd, std::string_view message) {
  std::string scratch(message.size(), '\0');
  return static_cast<bool>(echo_round_trip(fd, message, scratch, 5000));
}

HttpReply get(uint16_t port, const std::string& path) {
  auto reply = http_exchange(
      port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5000);
  return reply ? *reply : HttpReply{};
}

/// The inodes of the sockets listening on `port` (/proc/net/tcp and tcp6, state 0A).
std::vector<std::string> listening_inodes(uint16_t port) {
  std::vector<std::string> inodes;
  char hex_port[8];
  std::snprintf(hex_port, sizeof hex_port, "%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state == "0A" && local.size() > 5 && local.substr(local.size() - 4) == hex_port) {
        inodes.push_back(inode);
      }
    }
  }
  return inodes;
}

/// True when process `pid` holds one of `inodes` as an open fd.
bool holds_socket(pid_t pid, const std::vector<std::string>& inodes) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* fds = ::opendir(dir.c_str());
  if (fds == nullptr) return false;
  bool found = false;
  while (dirent* entry = ::readdir(fds)) {
    char target[128];
    const std::string link = dir + "/" + entry->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string text(target, static_cast<size_t>(n));
    for (const std::string& inode : inodes) found = found || text == "socket:[" + inode + "]";
  }
  ::closedir(fds);
  return found;
}

TEST_P(TakeoverProcess, HttpServerRestartsUnderWrkWithZeroFailedRequests) {
  if (!have_program("wrk")) GTEST_SKIP() << "wrk is not installed (scripts/install-deps.sh test)";
  Scratch scratch;
  // The old process drains for at most a second, well before wrk ends: a keep-alive
  // connection left on it then would be cut under wrk's feet and counted as an error.
  ServerProcess old_server(http_server(scratch, {}, {"server.shutdown_timeout_ms=1000"}));
  UCP_START_SERVER(old_server);
  const uint16_t port = old_server.port();
  CommandResult load;
  std::atomic<bool> load_done{false};
  std::thread wrk([&] {
    load = run_command({"wrk", "-t2", "-c16", "-d5s", "--timeout", "2s",
                        "http://127.0.0.1:" + std::to_string(port) + "/"},
                       30000);
    load_done = true;
  });
  std::this_thread::sleep_for(1s);  // the load runs on the old process first
  ServerProcess new_server(http_server(scratch, {"--takeover", scratch.path("takeover.sock")}));
  const bool started = new_server.start();
  const auto old_status = old_server.wait_exit(15000);
  const bool restarted_under_load = !load_done;
  wrk.join();
  EXPECT_TRUE(restarted_under_load) << "wrk ended before the old process: no load across it";
  ASSERT_TRUE(started) << new_server.error();
  EXPECT_EQ(new_server.port(), port);
  ASSERT_TRUE(old_status) << "the old server still runs:\n" << old_server.output_tail();
  EXPECT_TRUE(old_status->clean()) << old_status->describe() << "\n" << old_server.output_tail();
  EXPECT_EQ(old_server.count_output_lines("takeover: pid " + std::to_string(new_server.pid()) +
                                          " serves the listening sockets now"),
            1u)
      << old_server.output_tail();
  EXPECT_EQ(new_server.count_output_lines("(taken over from pid " +
                                          std::to_string(old_server.pid()) + ")"),
            1u)
      << new_server.output_tail();

  // wrk: requests on both sides of the restart, not one failed or answered with an error.
  ASSERT_EQ(load.exit_code, 0) << load.output;
  std::smatch count;
  ASSERT_TRUE(std::regex_search(load.output, count, std::regex(R"((\d+) requests in)")))
      << load.output;
  EXPECT_GT(std::stoll(count[1]), 100) << load.output;
  EXPECT_EQ(load.output.find("Socket errors"), std::string::npos) << load.output;
  EXPECT_EQ(load.output.find("Non-2xx"), std::string::npos) << load.output;
  std::printf("[ wrk      ] %s\n", load.output.c_str());

  // The new pid holds the listening socket and answers on it.
  const auto inodes = listening_inodes(port);
  if (!inodes.empty()) {  // a container may hide /proc/net
    EXPECT_TRUE(holds_socket(new_server.pid(), inodes));
  }
  EXPECT_EQ(get(port, "/").status, 200);
  EXPECT_TRUE(new_server.alive()) << new_server.output_tail();
  EXPECT_TRUE(new_server.stop(SIGTERM).clean()) << new_server.output_tail();
}

// The new process waits on the takeover socket in turn: a second restart works like the first.
TEST_P(TakeoverProcess, TheSuccessorCanBeTakenOverInTurn) {
  Scratch scratch;
  ServerProcess first(http_server(scratch));
  UCP_START_SERVER(first);
  const std::vector<std::string> takeover = {"--takeover", scratch.path("takeover.sock")};
  ServerProcess second(http_server(scratch, takeover));
  ASSERT_TRUE(second.start()) << second.error();
  ASSERT_TRUE(first.wait_exit(15000)) << first.output_tail();
  EXPECT_TRUE(first.exit_status()->clean()) << first.output_tail();
  ServerProcess third(http_server(scratch, takeover));
  ASSERT_TRUE(third.start()) << third.error();
  ASSERT_TRUE(second.wait_exit(15000)) << second.output_tail();
  EXPECT_TRUE(second.exit_status()->clean()) << second.output_tail();
  EXPECT_EQ(third.port(), first.port());
  EXPECT_EQ(get(third.port(), "/").status, 200);
  EXPECT_TRUE(third.stop(SIGTERM).clean()) << third.output_tail();
  EXPECT_FALSE(std::filesystem::exists(scratch.path("takeover.sock")))
      << "the socket path outlived the last server";
}

// A successor that fails before it serves (here: its document root is missing) closes the
// connection, and the old server goes on as if nothing had happened.
TEST_P(TakeoverProcess, AFailedSuccessorLeavesTheOldServerServing) {
  Scratch scratch;
  ServerProcess old_server(http_server(scratch));
  UCP_START_SERVER(old_server);
  ServerProcess bad(http_server(scratch, {"--takeover", scratch.path("takeover.sock")},
                                {"http.root=" + scratch.path("missing")}));
  EXPECT_FALSE(bad.start());
  ASSERT_TRUE(bad.wait_exit(15000));
  EXPECT_EQ(bad.exit_status()->code, 2) << bad.output_tail();
  EXPECT_TRUE(old_server.wait_for_output("did not start serving", 15000))
      << old_server.output_tail();
  EXPECT_TRUE(old_server.alive());
  EXPECT_EQ(get(old_server.port(), "/").status, 200);
  // Still the one to take over from.
  ServerProcess good(http_server(scratch, {"--takeover", scratch.path("takeover.sock")}));
  ASSERT_TRUE(good.start()) << good.error();
  ASSERT_TRUE(old_server.wait_exit(15000)) << old_server.output_tail();
  EXPECT_TRUE(good.stop(SIGTERM).clean()) << good.output_tail();
}

TEST_P(TakeoverProcess, NoServerAtThePathIsAStartUpFailure) {
  Scratch scratch;
  ServerProcess lonely(http_server(scratch, {"--takeover", scratch.path("nobody.sock")}));
  EXPECT_FALSE(lonely.start());
  ASSERT_TRUE(lonely.wait_exit(15000));
  EXPECT_EQ(lonely.exit_status()->code, 1) << lonely.output_tail();
  EXPECT_NE(lonely.output().find("cannot take over from " + scratch.path("nobody.sock")),
            std::string::npos)
      << lonely.output_tail();
}

// A TCP service with an acceptor per worker hands over every one of its sockets; a connection
// open on the old process is served on until the drain ends it (shutdown_timeout_ms), new
// connections reach the new process.
TEST_P(TakeoverProcess, EchoWithAnAcceptorPerWorkerHandsOverEverySocket) {
  Scratch scratch;
  ServerProcess::Options options;
  options.overrides = {"server.acceptors=per_worker",
                       "server.thread_num=2",
                       "server.shutdown_timeout_ms=1000",
                       "server.read_timeout_ms=0",
                       "server.takeover_socket=" + scratch.path("takeover.sock"),
                       "event_loop.backend=" + GetParam()};
  ServerProcess old_server(options);
  UCP_START_SERVER(old_server);
  auto held = connect_loopback(old_server.port());
  ASSERT_TRUE(held);
  ASSERT_TRUE(echoes(held->get(), "ping"));
  options.arguments = {"--takeover", scratch.path("takeover.sock")};
  ServerProcess new_server(options);
  ASSERT_TRUE(new_server.start()) << new_server.error();
  EXPECT_EQ(new_server.count_output_lines("takeover: 2 listening socket(s)"), 1u)
      << new_server.output_tail();
  EXPECT_EQ(new_server.count_output_lines("acceptors: per_worker"), 1u) << new_server.output_tail();
  // The held connection still echoes while the old process drains.
  EXPECT_TRUE(echoes(held->get(), "pong"));
  for (int i = 0; i < 20; ++i) {
    auto fresh = connect_loopback(new_server.port());
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(echoes(fresh->get(), "new!")) << i;
  }
  ASSERT_TRUE(old_server.wait_exit(15000)) << old_server.output_tail();
  EXPECT_TRUE(old_server.exit_status()->clean()) << old_server.output_tail();
  EXPECT_TRUE(new_server.stop(SIGTERM).clean()) << new_server.output_tail();
}

}  // namespace
}  // namespace ucp::test
