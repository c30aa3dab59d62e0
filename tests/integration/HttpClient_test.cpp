// http::Client against real servers as processes: bin/http_server and nginx (skipped, saying
// how to install it, where nginx is not there), each on a free loopback port: a file streamed
// and checked byte for byte, keep-alive reuse counted, request bodies, HEAD, Range, errors.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "ucp/http/Client.h"

#include "ExternalProcess.h"
#include "LoopRunner.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;
using http::Client;
using http::ClientRequest;
namespace fs = std::filesystem;

constexpr size_t kBigBytes = 3 * 1024 * 1024 + 17;

char pattern(size_t i) { return static_cast<char>(i * 13 % 251); }

class Documents {
 public:
  Documents() {
    char name[] = "/tmp/ucp-client-www-XXXXXX";
    dir_ = ::mkdtemp(name);
    std::string big(kBigBytes, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = pattern(i);
    std::ofstream(dir_ + "/big.bin", std::ios::binary) << big;
    std::ofstream(dir_ + "/index.html") << "<h1>index</h1>\n";
  }
  ~Documents() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

/// GETs /big.bin through `client` and checks every byte as the pieces come.
Task<> fetch_big(Client& client, std::string base, int& done) {
  auto response = co_await client.get(base + "/big.bin");
  EXPECT_TRUE(response) << response.error().message();
  if (!response) co_return;
  EXPECT_EQ(response->status(), 200);
  EXPECT_EQ(response->header("content-length"), std::to_string(kBigBytes));
  size_t offset = 0;
  size_t mismatches = 0;
  for (;;) {
    auto piece = co_await response->read();
    EXPECT_TRUE(piece) << piece.error().message();
    if (!piece || piece->empty()) break;
    for (const char c : *piece) mismatches += c != pattern(offset++) ? 1 : 0;
  }
  EXPECT_EQ(offset, kBigBytes);
  EXPECT_EQ(mismatches, 0u);
  ++done;
}

class HttpClientAgainst : public ::testing::Test {
 protected:
  void run_with(std::function<Task<>(EventLoop&)> body) {
    auto loop = make_loop(256);
    ASSERT_TRUE(loop);
    run_to_end(*loop, body(*loop), 60s);
  }
};

TEST_F(HttpClientAgainst, HttpServerBinary) {
  Documents www;
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"http.root=" + www.dir(), "server.thread_num=1"};
  ServerProcess server(options);
  ASSERT_TRUE(server.start()) << server.error();
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  run_with([&](EventLoop& loop) -> Task<> {
    Client client(loop);
    int done = 0;
    for (int i = 0; i < 3; ++i) co_await fetch_big(client, base, done);
    EXPECT_EQ(done, 3);

    ClientRequest echo;
    echo.method = "POST";
    echo.url = base + "/echo";
    echo.headers = {{"Content-Type", "text/x-test"}};
    echo.body = std::string(100000, 'e');
    auto echoed = co_await client.send(std::move(echo));
    EXPECT_TRUE(echoed);
    if (!echoed) co_return;
    EXPECT_EQ(echoed->header("content-type"), "text/x-test");
    EXPECT_EQ((co_await echoed->read_all()).value_or("?"), std::string(100000, 'e'));

    ClientRequest range;
    range.url = base + "/big.bin";
    range.headers = {{"Range", "bytes=10-19"}};
    auto ranged = co_await client.send(std::move(range));
    EXPECT_TRUE(ranged);
    if (!ranged) co_return;
    EXPECT_EQ(ranged->status(), 206);
    std::string expected;
    for (size_t i = 10; i < 20; ++i) expected.push_back(pattern(i));
    EXPECT_EQ((co_await ranged->read_all()).value_or("?"), expected);

    auto missing = co_await client.get(base + "/missing");
    EXPECT_TRUE(missing);
    if (missing) {
      EXPECT_EQ(missing->status(), 404);
      (void)co_await missing->read_all();
    }
    EXPECT_EQ(client.connections_made(), 1u);  // one keep-alive connection for all of it
  });
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST_F(HttpClientAgainst, Nginx) {
  Documents www;
  NginxProcess served(R"(
  server {
    listen 127.0.0.1:PORT;
    keepalive_requests 1000;
    root )" + www.dir() +
                      R"(;
    location = /moved { return 301 /index.html; }
  }
)");
  if (!served.available()) GTEST_SKIP() << "nginx is not installed (scripts/install-deps.sh test)";
  ASSERT_TRUE(served.start()) << served.output();
  const std::string base = "http://127.0.0.1:" + std::to_string(served.port());
  run_with([&](EventLoop& loop) -> Task<> {
    http::ClientOptions options;
    options.max_redirects = 2;
    Client client(loop, options);
    int done = 0;
    for (int i = 0; i < 3; ++i) co_await fetch_big(client, base, done);
    EXPECT_EQ(done, 3);

    auto moved = co_await client.get(base + "/moved");
    EXPECT_TRUE(moved) << moved.error().message();
    if (!moved) co_return;
    EXPECT_EQ(moved->status(), 200);
    EXPECT_EQ((co_await moved->read_all()).value_or("?"), "<h1>index</h1>\n");

    ClientRequest head;
    head.method = "HEAD";
    head.url = base + "/big.bin";
    auto headed = co_await client.send(std::move(head));
    EXPECT_TRUE(headed);
    if (!headed) co_return;
    EXPECT_EQ(headed->header("content-length"), std::to_string(kBigBytes));
    EXPECT_EQ((co_await headed->read_all()).value_or("?"), "");

    ClientRequest post;  // nginx answers a POST to a static file with 405
    post.method = "POST";
    post.url = base + "/index.html";
    post.body = "x";
    auto refused = co_await client.send(std::move(post));
    EXPECT_TRUE(refused);
    if (refused) {
      EXPECT_EQ(refused->status(), 405);
      (void)co_await refused->read_all();
    }
    EXPECT_LE(client.connections_made(), 2u);  // nginx closes after an error it answers
  });
}

}  // namespace
}  // namespace ucp::test
