#pragma once
// ScriptedServer: a raw TCP server on 127.0.0.1:<free port> whose every accepted connection runs
// a script on a thread of its own (blocking sockets, every wait bounded), for tests that need a
// peer misbehaving in a precise way: a malformed answer, a close at a chosen byte, silence.
//
//   ucp::test::ScriptedServer server([](int fd) {
//     std::string request = ucp::test::read_head(fd);     // up to the blank line
//     ucp::test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
//   });                                                    // the connection closes after it
//   ... connect to server.port() ...
//   EXPECT_EQ(server.accepted(), 1);
//
// Header-only; no UCP library.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "LoopbackClient.h"

namespace ucp::test {

class ScriptedServer {
 public:
  using Script = std::function<void(int fd)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(listen_fd_, 128);
    socklen_t length = sizeof(address);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;
  ~ScriptedServer() {
    stopping_ = true;
    acceptor_.join();
    ::close(listen_fd_);
    std::lock_guard lock(mutex_);
    for (auto& t : connections_) t.join();
  }

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void accept_loop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      accepted_.fetch_add(1);
      std::lock_guard lock(mutex_);
      connections_.emplace_back([this, fd] {
        script_(fd);
        ::close(fd);
      });
    }
  }

  Script script_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> connections_;
};

/// Reads up to and including the first blank line (a request or response head), bounded.
/// Whatever came after it in the same reads is appended to `*rest` when given.
inline std::string read_head(int fd, std::string* rest = nullptr, int64_t timeout_ms = 5000) {
  std::string data;
  char buffer[4096];
  for (;;) {
    const size_t end = data.find("\r\n\r\n");
    if (end != std::string::npos) {
      if (rest != nullptr) *rest += data.substr(end + 4);
      return data.substr(0, end + 4);
    }
    auto n = recv_some(fd, buffer, timeout_ms);
    if (!n || *n == 0) return data;
    data.append(buffer, *n);
  }
}

}  // namespace ucp::test
