#pragma once
// ServerProcess: runs bin/proactor_test as a child process for loopback integration tests.
//
//   ucp::test::ServerProcess server({"server.protocol=http", "server.read_timeout_ms=500"});
//   ASSERT_TRUE(server.start()) << server.error();
//   auto fd = ucp::test::connect_loopback(server.port());
//   ...
//   EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
//
// Each instance owns a private temp directory holding a generated config (loopback address,
// port 0, console log at INFO, log file inside the directory), the child's stdout+stderr
// ("output.log") and the server's own log file. `start` fork/execs the binary with the config
// and every override as `--set KEY=VALUE`, then waits (bounded) for the "listening on IP:PORT"
// line and parses the port (`launch` only starts it, for tests of start-up failures). The
// child gets SIGPIPE at its default disposition and an empty signal mask whatever the test
// process uses, optionally an address-space limit (RLIMIT_AS, like `prlimit --as`), and dies
// with the test (PR_SET_PDEATHSIG). With Options::listen_fd the child starts as systemd starts a
// socket-activated service: that socket at fd 3, LISTEN_FDS=1 and LISTEN_PID = the child's pid
// (or another pid, to check that a server ignores sockets meant for someone else).
// Options::block_io_uring runs it under a seccomp filter that makes io_uring_setup fail, as a
// container's default profile does.
// The destructor kills a server still running and removes the directory (kept when the
// environment variable UCP_KEEP_SERVER_LOGS is set). One thread uses an instance.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "SeccompFilter.h"

#ifndef UCP_BIN_DIR
#error "UCP_BIN_DIR must name the directory holding proactor_test (ucp_add_test defines it)"
#endif

namespace ucp::test {

/// How a child process ended.
struct ExitStatus {
  bool exited = false;         // returned from main / called exit
  int code = -1;               // exit code when `exited`
  int signal = 0;              // terminating signal otherwise
  bool force_killed = false;   // stop() had to fall back to SIGKILL
  bool still_running = false;  // never reaped

  bool clean() const { return exited && code == 0 && !force_killed; }
  /// "exit 0", "exit 2", "killed by signal 13 (Broken pipe)", "running".
  std::string describe() const {
    if (still_running) return "running";
    std::string text =
        exited ? "exit " + std::to_string(code)
               : "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    if (force_killed) text += " after the SIGKILL fallback";
    return text;
  }
  static ExitStatus from_wait_status(int status) {
    ExitStatus s;
    if (WIFEXITED(status)) {
      s.exited = true;
      s.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      s.signal = WTERMSIG(status);
    }
    return s;
  }
};

class ServerProcess {
 public:
  struct Options {
    std::vector<std::string> overrides;  // "section.key=value", applied after the defaults
    rlim_t nofile_limit = 0;             // RLIMIT_NOFILE for the child; 0 = inherit
    rlim_t address_space_limit = 0;      // RLIMIT_AS for the child (bytes); 0 = inherit
    std::string config_path;             // the CONFIG argument; empty = the generated file
    int block_io_uring = 0;  // > 0: a seccomp filter makes io_uring_setup fail with this errno
    int64_t start_timeout_ms = 30000;  // bound on the wait for "listening on"
    std::string binary = UCP_BIN_DIR "/proactor_test";
    int listen_fd = -1;                  // >= 0: the child's fd 3, with LISTEN_FDS=1
    bool listen_pid_is_child = true;     // false: LISTEN_PID names the test process
    std::vector<std::string> arguments;  // after CONFIG and the --set overrides
    // Non-empty: the child's whole command line after the binary, instead of CONFIG, the --set
    // overrides and `arguments` (a program with a command line of its own, e.g.
    // bin/example_tcp_proxy).
    std::vector<std::string> command_line;
  };

  explicit ServerProcess(std::vector<std::string> overrides = {}) {
    options_.overrides = std::move(overrides);
  }
  explicit ServerProcess(Options options) : options_(std::move(options)) {}
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() {
    if (pid_ > 0 && !status_) stop(SIGKILL, 5000);
    if (!dir_.empty() && std::getenv("UCP_KEEP_SERVER_LOGS") == nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  /// False when the server binary has not been built (tests skip then: see UCP_START_SERVER).
  bool binary_exists() const { return ::access(options_.binary.c_str(), X_OK) == 0; }

  /// Starts the server and waits until it logs "listening on". False (see error()) when the
  /// binary is missing, the child exits first, or the line does not appear in time.
  bool start() {
    if (!launch()) return false;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto port = find_listening_port()) {
        port_ = *port;
        return true;
      }
      if (!alive()) {
        return fail("server exited before listening (" + status_->describe() + "):\n" +
                    output_tail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return fail("no \"listening on\" line within " + std::to_string(options_.start_timeout_ms) +
                " ms:\n" + output_tail());
  }

  /// Starts the child and returns at once (no wait for "listening on"). False (see error())
  /// when the binary is missing or fork fails.
  bool launch() {
    if (pid_ > 0) return fail("already started");
    if (::access(options_.binary.c_str(), X_OK) != 0) {
      return fail(options_.binary + " is missing: build the proactor_test target first");
    }
    char dir_template[] = "/tmp/ucp-server-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) return fail(std::string("mkdtemp: ") + strerror(errno));
    dir_ = dir_template;
    const std::string config = dir_ + "/test.conf";
    {
      std::ofstream out(config);
      out << "# generated by tests/support/ServerProcess.h\n"
          << "[server]\nip = 127.0.0.1\nport = 0\n"
          << "[log]\nconsole = true\nlevel = INFO\nflush_interval_ms = 20\n"
          << "file = " << dir_ << "/server.log\n";
      if (!out) return fail("cannot write " + config);
    }
    // Everything the child needs is built before fork: only async-signal-safe calls after it.
    std::vector<std::string> args = {options_.binary,
                                     options_.config_path.empty() ? config : options_.config_path};
    for (const auto& o : options_.overrides) {
      args.push_back("--set");
      args.push_back(o);
    }
    args.insert(args.end(), options_.arguments.begin(), options_.arguments.end());
    if (!options_.command_line.empty()) {
      args = {options_.binary};
      args.insert(args.end(), options_.command_line.begin(), options_.command_line.end());
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string output = output_path();
    const int out_fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) return fail("cannot create " + output);
    const rlimit nofile{options_.nofile_limit, options_.nofile_limit};
    const bool set_nofile = options_.nofile_limit != 0;
    const rlimit address_space{options_.address_space_limit, options_.address_space_limit};
    const bool set_address_space = options_.address_space_limit != 0;
    const int block_io_uring = options_.block_io_uring;
    const pid_t parent = ::getpid();
    // Socket activation: the environment is built here; LISTEN_PID's digits are written in the
    // child (getpid() is async-signal-safe, formatting by hand too).
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (entry.rfind("LISTEN_", 0) != 0) environment.emplace_back(entry);
    }
    const bool activate = options_.listen_fd >= 0;
    char listen_pid[32] = "LISTEN_PID=";
    if (activate) {
      environment.emplace_back("LISTEN_FDS=1");
      if (!options_.listen_pid_is_child) {
        environment.emplace_back("LISTEN_PID=" + std::to_string(parent));
      }
    }
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    if (activate && options_.listen_pid_is_child) envp.push_back(listen_pid);
    envp.push_back(nullptr);
    const int listen_fd = options_.listen_fd;

    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(out_fd);
      return fail(std::string("fork: ") + strerror(errno));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(out_fd, STDERR_FILENO);
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
      // The test may ignore SIGPIPE or block signals; exec keeps both. The server must face the
      // default disposition, or a SIGPIPE bug would go unnoticed.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (set_nofile && ::setrlimit(RLIMIT_NOFILE, &nofile) != 0) ::_exit(126);
      if (set_address_space && ::setrlimit(RLIMIT_AS, &address_space) != 0) ::_exit(126);
      if (activate) {
        // fd 3 without close-on-exec, as a service manager passes it.
        if (listen_fd == 3) {
          if (::fcntl(3, F_SETFD, 0) != 0) ::_exit(125);
        } else if (::dup2(listen_fd, 3) != 3) {
          ::_exit(125);
        }
        char digits[16];
        int length = 0;
        for (pid_t self = ::getpid(); self > 0; self /= 10)
          digits[length++] = char('0' + self % 10);
        size_t at = std::strlen(listen_pid);
        while (length > 0) listen_pid[at++] = digits[--length];
        listen_pid[at] = '\0';
      }
      // As in a container whose seccomp profile blocks io_uring (kept across exec).
      if (block_io_uring > 0 && !block_io_uring_setup(block_io_uring)) ::_exit(125);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out_fd);
    pid_ = pid;
    return true;
  }

  /// Waits up to `timeout_ms` for a line of output containing `needle`; false if the child
  /// exits first or the time runs out.
  bool wait_for_output(const std::string& needle, int64_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (count_output_lines(needle) > 0) return true;
      if (!alive() || std::chrono::steady_clock::now() >= deadline) {
        return count_output_lines(needle) > 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  /// Sends `signal` to the child (if it still runs) without waiting.
  void send_signal(int signal) {
    if (pid_ > 0 && !status_) ::kill(pid_, signal);
  }

  /// Sends `signal` and waits up to `timeout_ms` for the exit; then SIGKILL (force_killed).
  ExitStatus stop(int signal = SIGTERM, int64_t timeout_ms = 10000) {
    if (pid_ <= 0) return ExitStatus{};
    if (status_) return *status_;
    ::kill(pid_, signal);
    if (auto s = wait_exit(timeout_ms)) return *s;
    ::kill(pid_, SIGKILL);
    auto s = wait_exit(5000);
    if (!s) return ExitStatus{.still_running = true};
    status_->force_killed = true;
    return *status_;
  }

  /// Waits up to `timeout_ms` for the child to exit on its own.
  std::optional<ExitStatus> wait_exit(int64_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (!alive()) return status_;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  /// True while the child runs (reaps it, keeping the status, once it has ended).
  bool alive() {
    if (pid_ <= 0) return false;
    if (status_) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return true;
    status_ = r == pid_ ? ExitStatus::from_wait_status(status) : ExitStatus{};
    return false;
  }

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  std::string output_path() const { return dir_ + "/output.log"; }
  std::optional<ExitStatus> exit_status() const { return status_; }

  /// The child's whole stdout+stderr so far.
  std::string output() const {
    std::ifstream in(output_path());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  /// The last `max_bytes` of output(), for assertion messages.
  std::string output_tail(size_t max_bytes = 4000) const {
    std::string text = output();
    if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
    return text;
  }
  /// Lines of output() containing `needle`.
  size_t count_output_lines(const std::string& needle) const {
    std::istringstream in(output());
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

  /// Resident set size in KiB (VmRSS), or -1 when the process is gone.
  int64_t rss_kb() const { return status_field("VmRSS:"); }
  /// Peak resident set size in KiB (VmHWM), or -1.
  int64_t peak_rss_kb() const { return status_field("VmHWM:"); }
  /// Open file descriptors (entries of /proc/PID/fd), or -1.
  int64_t fd_count() const {
    std::error_code ec;
    std::filesystem::directory_iterator it("/proc/" + std::to_string(pid_) + "/fd", ec);
    if (ec) return -1;
    int64_t n = 0;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (ec) return -1;
      ++n;
    }
    return n;
  }
  /// User + system CPU time consumed so far, in seconds (/proc/PID/stat), or -1.
  double cpu_seconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return -1;
    const size_t paren = stat.rfind(')');  // the command name may hold spaces
    if (paren == std::string::npos) return -1;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    // After ")": state is field 3; utime and stime are fields 14 and 15.
    for (int i = 3; i < 14 && fields >> field; ++i) {
    }
    long long utime = 0;
    long long stime = 0;
    if (!(fields >> utime >> stime)) return -1;
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  /// Threads in the process (/proc/PID/status "Threads:"), or -1.
  int64_t thread_count() const { return status_field("Threads:"); }
  /// True while `signal` waits to be taken (blocked and pending: /proc/PID/status ShdPnd or
  /// SigPnd); a server that reads signals from a signalfd clears it when it reads.
  bool signal_pending(int signal) const {
    const uint64_t bit = uint64_t{1} << (signal - 1);
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("ShdPnd:", 0) == 0 || line.rfind("SigPnd:", 0) == 0) {
        if (std::strtoull(line.c_str() + 7, nullptr, 16) & bit) return true;
      }
    }
    return false;
  }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  std::optional<uint16_t> find_listening_port() const {
    const std::string text = output();
    const std::string marker = "listening on ";
    const size_t at = text.find(marker);
    if (at == std::string::npos) return std::nullopt;
    const size_t eol = text.find('\n', at);
    if (eol == std::string::npos) return std::nullopt;  // the line is still being written
    const std::string line = text.substr(at + marker.size(), eol - at - marker.size());
    // "IP:PORT" or "[IPv6]:PORT", maybe followed by more words.
    const size_t bracket = line.rfind(']', line.find(' '));
    const size_t colon = line.find(':', bracket == std::string::npos ? 0 : bracket);
    if (colon == std::string::npos) return std::nullopt;
    long port = 0;
    size_t i = colon + 1;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
      port = port * 10 + (line[i] - '0');
    if (i == colon + 1 || port <= 0 || port > 65535) return std::nullopt;
    return static_cast<uint16_t>(port);
  }

  int64_t status_field(const std::string& key) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(key, 0) == 0) return std::strtoll(line.c_str() + key.size(), nullptr, 10);
    }
    return -1;
  }

  Options options_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::optional<ExitStatus> status_;
  std::string dir_;
  std::string error_;
};

}  // namespace ucp::test

/// In a GoogleTest body: starts `server`, skipping the test when bin/proactor_test has not been
/// built in this tree and failing it when the server does not come up.
#define UCP_START_SERVER(server)                                                            \
  do {                                                                                      \
    if (!(server).binary_exists()) GTEST_SKIP() << "proactor_test not built: " UCP_BIN_DIR; \
    ASSERT_TRUE((server).start()) << (server).error();                                      \
  } while (0)
