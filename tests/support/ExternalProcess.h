#pragma once
// ExternalProcess: a peer program (nginx, HAProxy, node) run in the foreground as a child for a
// loopback test, its output in a file, stopped by its PID (never by name), dying with the test.
//
//   auto nginx = ucp::test::find_program({"/usr/sbin/nginx"});
//   if (!nginx) GTEST_SKIP() << "nginx is not installed (scripts/install-deps.sh test)";
//   ucp::test::ExternalProcess peer({*nginx, "-c", config}, dir + "/nginx.out");
//   ASSERT_TRUE(peer.start());
//   ASSERT_TRUE(ucp::test::wait_listening(port)) << peer.output();
//
// Header-only; no UCP library.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ucp::test {

/// The first of `paths` that is executable.
inline std::optional<std::string> find_program(std::initializer_list<const char*> paths) {
  for (const char* path : paths) {
    if (::access(path, X_OK) == 0) return std::string(path);
  }
  return std::nullopt;
}

/// A loopback port nobody listens on right now (bound, read, closed: the peer binds it next).
inline uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  uint16_t port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

/// Waits (bounded) until something accepts connections on 127.0.0.1:`port`.
inline bool wait_listening(uint16_t port,
                           std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool connected =
        ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (connected) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class ExternalProcess {
 public:
  ExternalProcess(std::vector<std::string> argv, std::string output,
                  std::vector<std::string> environment = {})
      : argv_(std::move(argv)), output_(std::move(output)), environment_(std::move(environment)) {}
  ExternalProcess(const ExternalProcess&) = delete;
  ExternalProcess& operator=(const ExternalProcess&) = delete;
  ~ExternalProcess() { stop(); }

  bool start() {
    const int out = ::open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return false;
    std::vector<char*> argv;
    for (auto& a : argv_) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
    for (auto& e : environment_) env.push_back(e.data());
    env.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::execve(argv[0], argv.data(), env.data());
      ::_exit(127);
    }
    ::close(out);
    return pid_ > 0;
  }

  pid_t pid() const { return pid_; }

  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    return false;
  }

  /// SIGTERM (or `signal`), then SIGKILL after 5 s.
  void stop(int signal = SIGTERM) {
    if (!alive()) return;
    ::kill(pid_, signal);
    for (int i = 0; i < 500 && alive(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (alive()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  /// Waits (bounded) for the child to end; its exit code, or -1 (killed, or still running).
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  std::string output() const {
    std::ifstream in(output_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::vector<std::string> argv_;
  std::string output_;
  std::vector<std::string> environment_;
  pid_t pid_ = -1;
};

/// nginx in the foreground (no daemon, no master) with `http_block` (what goes inside
/// `http { }`, with PORT and DIR replaced) from its own directory under /tmp.
class NginxProcess {
 public:
  explicit NginxProcess(std::string http_block) : http_block_(std::move(http_block)) {}

  /// False when nginx is not installed (the caller skips).
  bool available() const { return binary_.has_value(); }

  bool start() {
    if (!binary_) return false;
    char dir_template[] = "/tmp/ucp-nginx-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) return false;
    dir_ = dir_template;
    port_ = free_loopback_port();
    std::string block = http_block_;
    replace_all(block, "PORT", std::to_string(port_));
    replace_all(block, "DIR", dir_);
    std::ofstream(dir_ + "/nginx.conf")
        << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << dir_
        << "/nginx.pid;\nerror_log " << dir_
        << "/error.log warn;\nevents { worker_connections 4096; }\n"
        << "http {\n  access_log off;\n  client_body_temp_path " << dir_ << "/body;\n"
        << "  proxy_temp_path " << dir_ << "/proxy;\n  fastcgi_temp_path " << dir_
        << "/fastcgi;\n  uwsgi_temp_path " << dir_ << "/uwsgi;\n  scgi_temp_path " << dir_
        << "/scgi;\n"
        << block << "\n}\n";
    process_.emplace(std::vector<std::string>{*binary_, "-p", dir_, "-c", dir_ + "/nginx.conf"},
                     dir_ + "/nginx.out");
    return process_->start() && wait_listening(port_);
  }
  uint16_t port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string output() const {
    std::ifstream in(dir_ + "/error.log");
    std::stringstream text;
    text << in.rdbuf();
    return (process_ ? process_->output() : std::string()) + text.str();
  }
  ~NginxProcess() {
    if (process_) process_->stop(SIGQUIT);
    process_.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

 private:
  static void replace_all(std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  std::string http_block_;
  std::optional<std::string> binary_ = find_program({"/usr/sbin/nginx", "/usr/local/sbin/nginx"});
  std::optional<ExternalProcess> process_;
  std::string dir_;
  uint16_t port_ = 0;
};

}  // namespace ucp::test
