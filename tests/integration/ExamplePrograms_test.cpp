// The three programs a newcomer writes first, as the examples have them, each against the
// client its users would use: the HTTP API with curl, the WebSocket chat across two loops with
// Node's `ws`, the reconnecting TCP client against a server that goes away and comes back.

#include <csignal>
#include <cstdlib>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "Command.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

ServerProcess::Options example(const std::string& name, std::vector<std::string> overrides = {}) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/example_" + name;
  options.overrides = std::move(overrides);
  return options;
}

/// "CODE BODY" for one request with curl ("204 " for an answer without a body).
std::string curl(uint16_t port, const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {"curl", "-s", "--max-time", "10", "-w", "\n%{http_code}"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  argv.back() = "http://127.0.0.1:" + std::to_string(port) + argv.back();
  auto result = run_command(argv, 15000);
  if (result.exit_code != 0) return "curl failed: " + result.output;
  const size_t split = result.output.rfind('\n');  // -w writes the code after the body
  if (split == std::string::npos) return "no status: " + result.output;
  return result.output.substr(split + 1) + " " + result.output.substr(0, split);
}

TEST(ExamplePrograms, HttpApiWithCurl) {
  if (!have_program("curl")) GTEST_SKIP() << "curl not installed (make test installs it)";
  if (::access(UCP_BIN_DIR "/example_http_api", X_OK) != 0) {
    GTEST_SKIP() << "example_http_api not built: nlohmann/json is missing (make test installs "
                    "nlohmann-json3-dev)";
  }
  ServerProcess server(example("http_api"));
  UCP_START_SERVER(server);
  const uint16_t port = server.port();
  const std::string json = "Content-Type: application/json";
  EXPECT_EQ(curl(port, {"-X", "PUT", "-H", json, "-d", R"({"qty":5})", "/items/apple"}),
            "201 Created\n");
  EXPECT_EQ(curl(port, {"-X", "PUT", "-H", json, "-d", R"({"qty":7})", "/items/apple"}), "204 ");
  EXPECT_EQ(curl(port, {"-X", "PUT", "-H", json, "-d", "{}", "/items/pear"}).substr(0, 4), "201 ");
  EXPECT_EQ(curl(port, {"/items/apple"}), R"(200 {"qty":7})");
  EXPECT_EQ(curl(port, {"/items"}), R"(200 ["apple","pear"])");
  EXPECT_EQ(curl(port, {"-X", "PUT", "-d", "qty=5", "/items/plum"}).substr(0, 4), "415 ");
  EXPECT_EQ(curl(port, {"-X", "PUT", "-H", json, "-d", "{\"qty\":", "/items/plum"}).substr(0, 4),
            "400 ");
  EXPECT_EQ(curl(port, {"-X", "PUT", "-H", json, "-d", "[1]", "/items/my%20plum"}).substr(0, 4),
            "201 ");
  EXPECT_EQ(curl(port, {"/items/my%20plum"}), "200 [1]");
  EXPECT_EQ(curl(port, {"-X", "DELETE", "/items/apple"}), "204 ");
  EXPECT_EQ(curl(port, {"-X", "DELETE", "/items/apple"}).substr(0, 4), "404 ");
  EXPECT_EQ(curl(port, {"/items/apple"}).substr(0, 4), "404 ");
  EXPECT_EQ(curl(port, {"-X", "POST", "/items/apple"}).substr(0, 4), "405 ");
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

/// Empty when node can load `ws`; otherwise why not (WebSocketInterop_test installs it).
std::string node_ws_unavailable() {
  if (!have_program("node")) return "node is not installed (apt-get install nodejs)";
  ::setenv("NODE_PATH", UCP_SOURCE_DIR "/build/npm/node_modules:/usr/share/nodejs", 1);
  if (run_command({"node", "-e", "require('ws')"}, 20000).exit_code == 0) return {};
  if (!have_program("npm")) return "the ws module is missing and npm is not installed";
  run_command({"npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix",
               UCP_SOURCE_DIR "/build/npm", "ws@8"},
              180000);
  if (run_command({"node", "-e", "require('ws')"}, 20000).exit_code == 0) return {};
  return "npm install ws failed";
}

TEST(ExamplePrograms, WsChatAcrossTwoLoopsWithNodeWs) {
  const std::string missing = node_ws_unavailable();
  if (!missing.empty()) GTEST_SKIP() << "Node ws client unavailable: " << missing;
  ServerProcess server(example("ws_chat"));
  UCP_START_SERVER(server);
  const std::string base = "ws://127.0.0.1:" + std::to_string(server.port()) + "/chat";
  auto result =
      run_command({"node", UCP_SOURCE_DIR "/tests/interop/node_ws_chat.js", base, "6"}, 60000);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

/// A line server the test drives by hand: listen, accept one client, read its line, answer.
class LineServer {
 public:
  explicit LineServer(uint16_t port = 0) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int on = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_.get(), 8), 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  uint16_t port() const { return port_; }
  /// The next client, within the timeout (invalid if none came).
  UniqueFd accept(int64_t timeout_ms = 10000) {
    if (!wait_for(listener_.get(), POLLIN, Deadline(timeout_ms))) return {};
    return UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }

 private:
  UniqueFd listener_;
  uint16_t port_ = 0;
};

std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (line.empty() || line.back() != '\n') {
    auto n = recv_some(fd, std::span(&c, 1), 10000);
    if (!n || *n == 0) break;
    line += c;
  }
  return line;
}

TEST(ExamplePrograms, ReconnectingClientFollowsAServerThatRestarts) {
  auto server = std::make_unique<LineServer>();
  const uint16_t port = server->port();
  ServerProcess client(example("reconnecting_client", {"feed.port=" + std::to_string(port)}));
  ASSERT_TRUE(client.launch()) << client.error();
  {
    UniqueFd session = server->accept();
    ASSERT_TRUE(session.valid()) << client.output_tail();
    EXPECT_EQ(read_line(session.get()), "SUBSCRIBE prices\n");
    ASSERT_TRUE(send_text(session.get(), "tick 1\ntick "));  // a line split across reads
    ASSERT_TRUE(send_text(session.get(), "2\n"));
    EXPECT_TRUE(client.wait_for_output("feed: tick 2", 10000)) << client.output_tail();
  }                // the session ends
  server.reset();  // and the server goes away: the client's attempts are refused
  EXPECT_TRUE(client.wait_for_output("next attempt in", 10000)) << client.output_tail();
  server = std::make_unique<LineServer>(port);  // back on the same port
  UniqueFd session = server->accept(40000);
  ASSERT_TRUE(session.valid()) << client.output_tail();
  EXPECT_EQ(read_line(session.get()), "SUBSCRIBE prices\n");
  ASSERT_TRUE(send_text(session.get(), "tick 3\n"));
  EXPECT_TRUE(client.wait_for_output("feed: tick 3", 10000)) << client.output_tail();
  EXPECT_EQ(client.count_output_lines("connected to 127.0.0.1:" + std::to_string(port)), 2u)
      << client.output_tail();
  EXPECT_TRUE(client.stop(SIGTERM).clean()) << client.output_tail();
}

}  // namespace
}  // namespace ucp::test
