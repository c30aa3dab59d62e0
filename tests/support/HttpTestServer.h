#pragma once
// HttpTestServer: an HttpServer on 127.0.0.1:<free port> with one worker, running on a thread
// of its own, on the backend under test (Backends.h: UCP_TEST_BACKEND), for the HTTP layer's
// loopback tests. Small receive buffers, so that bodies run the buffer ring dry.
//
//   test::HttpTestServer s([](http::HttpServer& server) { server.router().get(...); });
//   auto fd = test::connect_loopback(s.port());
//   std::string pending;
//   auto reply = test::ask(fd->get(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", pending);
//
// Header-only; stop() at destruction, every wait bounded.

#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "ucp/http/HttpServer.h"

#include "Backends.h"
#include "ErrorText.h"
#include "HttpClient.h"
#include "LoopbackClient.h"

namespace ucp::test {

class HttpTestServer {
 public:
  explicit HttpTestServer(const std::function<void(http::HttpServer&)>& configure,
                          http::HttpOptions http = {}, uint64_t max_output_bytes = 4 << 20) {
    ::signal(SIGPIPE, SIG_IGN);
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 2000;
    options.max_output_bytes = max_output_bytes;
    LoopOptions loop;
    loop.backend = backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;  // small: bodies run the ring dry
    loop.provided_buffer_size = 4096;
    server_ = std::make_unique<http::HttpServer>(options, loop, http);
    configure(*server_);
    const std::string error = error_text(server_->start());
    EXPECT_EQ(error, "");
    thread_ = std::thread([this] { server_->run(); });
  }
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;
  ~HttpTestServer() {
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }
  http::HttpServer& server() { return *server_; }

 private:
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
};

/// Sends `request` on `fd` and reads one response (bounded: 5 s). `head`: it answers HEAD.
inline HttpReply ask(int fd, std::string_view request, std::string& pending, bool head = false) {
  EXPECT_TRUE(send_text(fd, request));
  auto reply = read_response(fd, pending, 5000, head);
  EXPECT_TRUE(reply) << reply.error().message();
  return reply ? *reply : HttpReply{};
}

/// One request on a connection of its own.
inline HttpReply ask_once(uint16_t port, std::string_view request, bool head = false) {
  auto fd = connect_loopback(port);
  EXPECT_TRUE(fd) << "connect";
  if (!fd) return {};
  std::string pending;
  return ask(fd->get(), request, pending, head);
}

}  // namespace ucp::test
