#pragma once
// An echo TcpServer on its own thread in the test process, on a free port.

#include <array>
#include <memory>
#include <string>
#include <thread>

#include "ucp/net/TcpServer.h"

#include "Backends.h"

namespace ucp::test {

inline Task<> echo_handler(TcpConnection& connection) {
  std::array<std::byte, 4096> buffer;
  for (;;) {
    auto n = co_await connection.read(buffer);
    if (!n || *n == 0) co_return;
    if (!co_await connection.write_all(std::span(buffer.data(), *n))) co_return;
  }
}

class InProcessEchoServer {
 public:
  /// Check started() (an address family the host lacks, e.g. "::1", cannot be listened on).
  explicit InProcessEchoServer(std::string ip = "127.0.0.1", uint32_t listen_backlog = 4096) {
    ServerOptions options;
    options.ip = std::move(ip);
    options.port = 0;
    options.thread_num = 1;
    options.read_timeout_ms = 20000;
    options.shutdown_timeout_ms = 2000;
    options.listen.backlog = listen_backlog;
    LoopOptions loop;
    loop.backend = backend_under_test();
    loop.ring_entries = 256;
    server_ = std::make_unique<TcpServer>(options, loop, &echo_handler);
    error_ = server_->start();
    if (!error_.empty()) return;
    port_ = server_->local_address().port();
    thread_ = std::thread([this] { server_->run(); });
  }
  InProcessEchoServer(const InProcessEchoServer&) = delete;
  InProcessEchoServer& operator=(const InProcessEchoServer&) = delete;
  ~InProcessEchoServer() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  bool started() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }

 private:
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
  std::string error_;
  uint16_t port_ = 0;
};

}  // namespace ucp::test
