// WebSocket interoperability with clients and servers written by others, over loopback:
// Node's `ws` package (npm) and Boost.Beast (Debian libboost-dev) talk to bin/http_server's
// GET /ws/echo, with and without permessage-deflate (tests/interop/ holds the two clients);
// and UCP's own client talks to a Node `ws` echo server (bench/peers/node_ws_echo.js).
//
// The Node tests need `node` and the `ws` module: scripts/install-deps.sh interop installs
// them (npm install into build/npm); when ws is missing here the test tries that npm install
// itself, and skips with the reason only if it cannot. The Beast test is built when Boost is
// found (UCP_BEAST_WS_CLIENT).

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ucp/ws/WebSocket.h"

#include "Command.h"
#include "LoopRunner.h"
#include "NodeWs.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

ServerProcess::Options http_server(const std::string& root) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"http.root=" + root, "server.thread_num=2"};
  return options;
}

class WebSocketInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/ucp-ws-interop-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
  }
  void TearDown() override { ::rmdir(root_.c_str()); }
  std::string root_;
};

TEST_F(WebSocketInterop, NodeWsClientTalksToOurServer) {
  const std::string missing = node_ws_unavailable();
  if (!missing.empty()) GTEST_SKIP() << "Node ws client unavailable: " << missing;
  ServerProcess server(http_server(root_));
  ASSERT_TRUE(server.start()) << server.error();
  const std::string url = "ws://127.0.0.1:" + std::to_string(server.port()) + "/ws/echo";
  for (const char* mode : {"plain", "deflate"}) {
    auto result =
        run_command({"node", UCP_SOURCE_DIR "/tests/interop/node_ws_client.js", url, mode}, 60000);
    EXPECT_EQ(result.exit_code, 0) << mode << ":\n" << result.output;
    EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;
  }
  EXPECT_TRUE(server.stop().clean());
}

#ifdef UCP_BEAST_WS_CLIENT
TEST_F(WebSocketInterop, BeastClientTalksToOurServer) {
  ServerProcess server(http_server(root_));
  ASSERT_TRUE(server.start()) << server.error();
  for (const char* mode : {"plain", "deflate"}) {
    auto result = run_command(
        {UCP_BEAST_WS_CLIENT, "127.0.0.1", std::to_string(server.port()), "/ws/echo", mode}, 60000);
    EXPECT_EQ(result.exit_code, 0) << mode << ":\n" << result.output;
    EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;
  }
  EXPECT_TRUE(server.stop().clean());
}
#else
TEST_F(WebSocketInterop, BeastClientTalksToOurServer) {
  GTEST_SKIP() << "Boost.Beast client not built: Boost was not found (apt-get install "
                  "libboost-dev, then re-run cmake)";
}
#endif

/// A child process (the Node echo server) that prints "listening on IP:PORT"; killed by its
/// PID at the end.
class NodeEchoServer {
 public:
  NodeEchoServer() {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      const char* argv[] = {"node", UCP_SOURCE_DIR "/bench/peers/node_ws_echo.js", "0", nullptr};
      ::execvp("node", const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    char buffer[256];
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      line.append(buffer, static_cast<size_t>(n));
    }
    ::close(out[0]);
    const size_t colon = line.rfind(':');
    if (line.rfind("listening on", 0) == 0 && colon != std::string::npos) {
      port_ = static_cast<uint16_t>(std::atoi(line.c_str() + colon + 1));
    }
  }
  ~NodeEchoServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

TEST_F(WebSocketInterop, OurClientTalksToANodeWsServer) {
  const std::string missing = node_ws_unavailable();
  if (!missing.empty()) GTEST_SKIP() << "Node ws server unavailable: " << missing;
  NodeEchoServer node;
  ASSERT_NE(node.port(), 0) << "the Node ws echo server did not start";
  auto loop = make_loop(64);
  ASSERT_TRUE(loop);
  run_to_end(
      *loop,
      [](EventLoop& l, std::string url) -> Task<> {
        auto ws = co_await ws::WebSocket::connect(l, url);
        EXPECT_TRUE(ws) << ws.error().message();
        if (!ws) co_return;
        for (size_t size : {0u, 5u, 125u, 126u, 65535u, 65536u, 300000u}) {
          std::string payload(size, '\0');
          for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);
          EXPECT_TRUE(co_await (*ws)->send_text(payload));
          auto echo = co_await (*ws)->receive();
          EXPECT_TRUE(echo && echo->is_text() && echo->text() == payload) << size;
          const auto bytes = std::as_bytes(std::span(payload.data(), payload.size()));
          EXPECT_TRUE(co_await (*ws)->send_binary(bytes));
          auto binary = co_await (*ws)->receive();
          EXPECT_TRUE(binary && !binary->is_text() && binary->text() == payload) << size;
        }
        EXPECT_TRUE(co_await (*ws)->ping());
        EXPECT_TRUE(co_await (*ws)->close(1000, "bye"));
        EXPECT_EQ((*ws)->close_code(), 1000);
      }(*loop, "ws://127.0.0.1:" + std::to_string(node.port()) + "/"),
      30s);
}

}  // namespace
}  // namespace ucp::test
