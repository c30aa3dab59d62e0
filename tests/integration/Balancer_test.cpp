// deploy/haproxy.cfg, the README's example of several UCP instances behind an L4 balancer, as
// shipped: two bin/proactor_test instances and HAProxy on free loopback ports (the file's
// ports replaced, nothing else), echo through the balancer, then again with one instance
// stopped. Skipped, saying how to install it, where HAProxy is not installed.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "Command.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

const char* const kHaproxyConfig = UCP_SOURCE_DIR "/deploy/haproxy.cfg";

std::optional<std::string> find_haproxy() {
  for (const char* path : {"/usr/sbin/haproxy", "/usr/local/sbin/haproxy", "/usr/bin/haproxy"}) {
    if (::access(path, X_OK) == 0) return std::string(path);
  }
  return std::nullopt;
}

// A port nobody listens on right now (bound, read, closed: the balancer binds it next).
uint16_t free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  return ntohs(address.sin_port);
}

// Replaces the one occurrence of `from` in `text`; false when it is not there exactly once.
bool replace_once(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) return false;
  text.replace(at, from.size(), to);
  return true;
}

// HAProxy in the foreground (-db), output to a file, stopped by its PID.
class Balancer {
 public:
  Balancer(std::string binary, std::string config, std::string output)
      : binary_(std::move(binary)), config_(std::move(config)), output_(std::move(output)) {}
  Balancer(const Balancer&) = delete;
  Balancer& operator=(const Balancer&) = delete;
  ~Balancer() { stop(); }

  bool start() {
    const int out = ::open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return false;
    std::vector<std::string> args = {binary_, "-db", "-f", config_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out);
    return pid_ > 0;
  }

  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    return false;
  }

  void stop() {
    if (!alive()) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500 && alive(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (alive()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  std::string output() const {
    std::ifstream in(output_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string binary_;
  std::string config_;
  std::string output_;
  pid_t pid_ = -1;
};

// One connection through the balancer: connect, echo `message`, close.
bool echo_through(uint16_t port, const std::string& message) {
  auto connection = connect_loopback(port);
  if (!connection) return false;
  std::string scratch(message.size(), '\0');
  return static_cast<bool>(echo_round_trip(connection->get(), message, scratch));
}

// The sum of `accepted=` over a server's stats lines: the connections it served. A last line
// without its newline is still being written and waits for the next look.
uint64_t accepted_by(const ServerProcess& server) {
  std::istringstream in(server.output());
  uint64_t sum = 0;
  for (std::string line; std::getline(in, line) && !in.eof();) {
    const size_t at = line.find(" accepted=");
    if (line.find("stats: ") != std::string::npos && at != std::string::npos) {
      sum += std::stoull(line.substr(at + 10));
    }
  }
  return sum;
}

TEST(Balancer, HaproxyExampleConfigBalancesTwoInstancesAndSurvivesOneStopping) {
  const auto haproxy = find_haproxy();
  if (!haproxy) {
    GTEST_SKIP() << "HAProxy is not installed: apt-get install haproxy (make test installs it "
                    "as root) to test deploy/haproxy.cfg";
  }
  ::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> overrides = {"log.stats_interval_ms=100"};
  ServerProcess first(overrides);
  UCP_START_SERVER(first);
  ServerProcess second(overrides);
  UCP_START_SERVER(second);

  std::ifstream in(kHaproxyConfig);
  ASSERT_TRUE(in) << "cannot read " << kHaproxyConfig;
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  // The frontend port is free when picked, but another process may bind it before HAProxy
  // does: HAProxy then exits at once, and the test tries again on another port.
  std::unique_ptr<Balancer> balancer;
  uint16_t front = 0;
  for (int attempt = 0; attempt < 5 && !balancer; ++attempt) {
    front = free_port();
    ASSERT_NE(front, 0);
    std::string with_ports = config;
    ASSERT_TRUE(replace_once(with_ports, "bind :8888", "bind 127.0.0.1:" + std::to_string(front)));
    ASSERT_TRUE(replace_once(with_ports, "server ucp1 127.0.0.1:8881",
                             "server ucp1 127.0.0.1:" + std::to_string(first.port())));
    ASSERT_TRUE(replace_once(with_ports, "server ucp2 127.0.0.1:8882",
                             "server ucp2 127.0.0.1:" + std::to_string(second.port())));
    const std::string path = first.dir() + "/haproxy.cfg";
    std::ofstream(path) << with_ports;
    const CommandResult check = run_command({*haproxy, "-c", "-f", path}, 10000);
    ASSERT_EQ(check.exit_code, 0) << check.output;
    auto started = std::make_unique<Balancer>(*haproxy, path, first.dir() + "/haproxy.log");
    ASSERT_TRUE(started->start());
    // Ready once an echo comes back through it (bounded).
    const Deadline ready(30000);
    while (!echo_through(front, "ready?") && !ready.expired() && started->alive()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!started->alive()) {
      std::printf("HAProxy exited on port %u, trying another:\n%s\n", unsigned{front},
                  started->output().c_str());
      continue;
    }
    ASSERT_TRUE(echo_through(front, "ready?")) << started->output();
    balancer = std::move(started);
  }
  ASSERT_TRUE(balancer) << "HAProxy never stayed up on a free port";

  // Both instances serve. leastconn does not alternate strictly (a connection the balancer
  // has not yet closed on the server side still counts as load; the health checks are
  // connections too, and on a loaded machine one can miss and hold an instance back for a
  // moment), so each instance must carry a real share, not exactly half: connections go on,
  // up to ten times as many, until both have one.
  constexpr int kConnections = 40;
  const auto both_served = [&] {
    return accepted_by(first) >= kConnections / 4 && accepted_by(second) >= kConnections / 4 &&
           accepted_by(first) + accepted_by(second) >= kConnections;
  };
  for (int i = 0; i < 10 * kConnections && (i < kConnections || !both_served()); ++i) {
    ASSERT_TRUE(echo_through(front, "through the balancer " + std::to_string(i)))
        << "connection " << i << "\n"
        << balancer->output();
  }
  const Deadline counted(30000);
  while (!both_served() && !counted.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(accepted_by(first), uint64_t{kConnections / 4}) << first.output_tail();
  EXPECT_GE(accepted_by(second), uint64_t{kConnections / 4}) << second.output_tail();
  EXPECT_GE(accepted_by(first) + accepted_by(second), uint64_t{kConnections});

  // One instance stops (a rolling restart): the balancer sends every new connection to the
  // other, before its health check has noticed too (option redispatch).
  EXPECT_TRUE(first.stop(SIGTERM).clean()) << first.output_tail();
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(echo_through(front, "one instance left " + std::to_string(i)))
        << "connection " << i << "\n"
        << balancer->output();
  }
  balancer->stop();
  EXPECT_TRUE(second.stop(SIGTERM).clean()) << second.output_tail();
}

}  // namespace
}  // namespace ucp::test
