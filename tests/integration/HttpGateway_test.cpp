// HttpGateway in-process, on each backend, in front of in-process HttpServer upstreams and
// scripted raw ones: routing by host and longest prefix, the forwarding fields and the
// hop-by-hop ones removed both ways, pooled keep-alive connections counted, bodies streamed
// both ways, 404/502/503/504, request smuggling stopped at the gateway, WebSocket through it,
// a server closing or dying under a response, Expect: 100-continue, HEAD and HTTP/1.0.

#include "ucp/proxy/HttpGateway.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/http/HttpServer.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/WebSocket.h"

#include "Backends.h"
#include "ErrorText.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ScriptedServer.h"
#include "WsRawClient.h"

namespace ucp::proxy {
namespace {

using namespace std::chrono_literals;
using http::Request;
using http::Response;

/// An HttpServer upstream on its own thread, named (GET /who answers the name).
class Upstream {
 public:
  Upstream(BackendKind backend, std::string name) : name_(std::move(name)) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 1000;
    LoopOptions loop;
    loop.backend = backend;
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    http::HttpOptions http;
    http.max_body_bytes = 16 << 20;
    server_ = std::make_unique<http::HttpServer>(options, loop, http);
    auto& r = server_->router();
    r.get("/who", [this](Request&, Response& res) -> Task<> {
      res.body_buffer() = name_;
      co_return;
    });
    r.get("/api/who", [this](Request&, Response& res) -> Task<> {
      res.body_buffer() = name_;
      co_return;
    });
    r.get("/headers", [](Request& req, Response& res) -> Task<> {
      for (const http::Header& h : req.headers()) {
        res.body_buffer() += std::string(h.name) + ": " + std::string(h.value) + "\n";
      }
      co_return;
    });
    r.post("/echo", [](Request& req, Response& res) -> Task<> {
      res.set_body(req.body());
      co_return;
    });
    r.get("/stream/{kib}", [](Request& req, Response& res) -> Task<> {
      const int kib = std::stoi(std::string(req.param("kib")));
      const std::string piece(1024, 'z');
      for (int i = 0; i < kib; ++i) {
        if (!co_await res.write(piece)) co_return;
      }
    });
    r.get("/path/*", [this](Request& req, Response& res) -> Task<> {
      res.body_buffer() = name_ + " " + std::string(req.target());  // the target as received
      co_return;
    });
    r.get("/ws/echo", ws::upgrade(ws::Options{}, [](ws::WebSocket& socket) -> Task<> {
            while (auto message = co_await socket.receive()) {
              if (!co_await socket.send(message->kind, message->data)) break;
            }
          }));
    error_ = test::error_text(server_->start());
    if (error_.empty()) thread_ = std::thread([this] { server_->run(); });
  }
  ~Upstream() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  uint16_t port() const { return server_->local_address().port(); }
  bool started() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t accepted() const {
    uint64_t n = 0;
    for (const auto& s : server_->stats()) n += s.connections_accepted;
    return n;
  }

 private:
  std::string name_;
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
  std::string error_;
};

class Gateway {
 public:
  explicit Gateway(HttpGatewayOptions options) : gateway_(std::move(options)) {
    error_ = test::error_text(gateway_.start());
    if (error_.empty()) thread_ = std::thread([this] { gateway_.run(); });
  }
  ~Gateway() {
    if (thread_.joinable()) {
      gateway_.stop_now();
      thread_.join();
    }
  }
  bool started() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return gateway_.local_address().port(); }
  HttpGateway* operator->() { return &gateway_; }

 private:
  HttpGateway gateway_;
  std::thread thread_;
  std::string error_;
};

UpstreamGroupOptions group(std::string name, std::vector<uint16_t> ports) {
  UpstreamGroupOptions g;
  g.name = std::move(name);
  for (uint16_t port : ports) g.servers.push_back({"127.0.0.1", port, 1});
  return g;
}

HttpGatewayOptions options(BackendKind backend, std::vector<UpstreamGroupOptions> groups,
                           std::string default_upstream, std::vector<HttpRoute> routes = {}) {
  HttpGatewayOptions o;
  o.server.ip = "127.0.0.1";
  o.server.port = 0;
  o.server.thread_num = 1;
  o.server.shutdown_timeout_ms = 1000;
  o.loop.backend = backend;
  o.loop.ring_entries = 512;
  o.loop.provided_buffers_count = 256;
  o.proxy.default_upstream = std::move(default_upstream);
  o.proxy.routes = std::move(routes);
  o.proxy.linger_timeout_ms = 200;
  o.upstreams = std::move(groups);
  return o;
}

/// One request on `fd` and its answer (bounded waits).
test::HttpReply ask(int fd, const std::string& request, std::string& pending, bool head = false) {
  EXPECT_TRUE(test::send_text(fd, request));
  auto reply = test::read_response(fd, pending, 10000, head);
  EXPECT_TRUE(reply) << reply.error().message();
  return reply ? *reply : test::HttpReply{};
}

std::string get(const std::string& path, const std::string& host = "gw.test") {
  return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
}

class HttpGatewayTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
  BackendKind backend() const { return GetParam(); }
};

#define START_OR_FAIL(server) ASSERT_TRUE((server).started()) << (server).error()

TEST_P(HttpGatewayTest, RoutesByHostAndLongestPrefix) {
  Upstream web(backend(), "web"), api(backend(), "api"), admin(backend(), "admin");
  START_OR_FAIL(web);
  START_OR_FAIL(api);
  START_OR_FAIL(admin);
  Gateway gateway(options(
      backend(),
      {group("web", {web.port()}), group("api", {api.port()}), group("admin", {admin.port()})},
      "web",
      {{"api", "*", "/api/", "api"},
       {"api-who", "*", "/api/who", "admin"},
       {"admin-host", "admin.test", "/", "admin"}}));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  EXPECT_EQ(ask(fd->get(), get("/who"), pending).body, "web");        // the default
  EXPECT_EQ(ask(fd->get(), get("/api/who"), pending).body, "admin");  // longer prefix
  EXPECT_EQ(ask(fd->get(), get("/who", "ADMIN.test:8080"), pending).body, "admin");  // host
  // Routes see the path decoded and normalized; the server gets the target as it was sent.
  EXPECT_EQ(ask(fd->get(), get("/path/%2e%2e/api/who"), pending).body,
            "admin /path/%2e%2e/api/who");
  EXPECT_EQ(ask(fd->get(), get("/path/x/../y"), pending).body, "web /path/x/../y");
  EXPECT_EQ(ask(fd->get(), get("/../x"), pending).status, 400);  // above the root
  fd = test::connect_loopback(gateway.port());                   // the 400 closed the connection
  ASSERT_TRUE(fd);
  pending.clear();
  const auto under_api = ask(fd->get(), get("/api/x"), pending);
  EXPECT_EQ(under_api.status, 404);  // api's own 404: the route matched
  // Without a default, what no route matches is the gateway's 404.
  Gateway strict(
      options(backend(), {group("api", {api.port()})}, "", {{"a", "*", "/api/", "api"}}));
  START_OR_FAIL(strict);
  auto fd2 = test::connect_loopback(strict.port());
  ASSERT_TRUE(fd2);
  std::string pending2;
  EXPECT_EQ(ask(fd2->get(), get("/who"), pending2).status, 404);
  EXPECT_EQ(ask(fd2->get(), get("/api/who"), pending2).body, "api");  // and the connection lives
  EXPECT_EQ(strict->proxy().total().not_found, 1u);
}

TEST_P(HttpGatewayTest, AddsForwardingFieldsAndDropsHopByHopOnes) {
  Upstream web(backend(), "web");
  START_OR_FAIL(web);
  Gateway gateway(options(backend(), {group("web", {web.port()})}, "web"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  const auto reply = ask(fd->get(),
                         "GET /headers HTTP/1.1\r\nHost: shop.test\r\nConnection: keep-alive, "
                         "X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
                         "Proxy-Connection: keep-alive\r\nX-Forwarded-For: 203.0.113.9\r\n"
                         "X-Forwarded-Proto: https\r\nForwarded: for=203.0.113.9\r\n"
                         "X-Kept: yes\r\n\r\n",
                         pending);
  ASSERT_EQ(reply.status, 200);
  const std::string& seen = reply.body;
  EXPECT_NE(seen.find("Host: shop.test\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("X-Kept: yes\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("X-Forwarded-For: 203.0.113.9, 127.0.0.1\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("X-Forwarded-Proto: http\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Forwarded: for=203.0.113.9, for=127.0.0.1;proto=http;host=\"shop.test\"\n"),
            std::string::npos)
      << seen;
  for (const char* gone : {"X-Secret", "Keep-Alive", "TE:", "Proxy-Connection", "Connection"}) {
    EXPECT_EQ(seen.find(gone), std::string::npos) << gone << " reached the upstream:\n" << seen;
  }
}

TEST_P(HttpGatewayTest, DropsTheUpstreamsHopByHopFields) {
  test::ScriptedServer upstream([](int fd) {
    std::string rest;
    while (!test::read_head(fd, &rest).empty()) {
      (void)test::send_text(
          fd,
          "HTTP/1.1 200 OK\r\nConnection: X-Up\r\nX-Up: 1\r\nKeep-Alive: "
          "timeout=5\r\nUpgrade: h2c\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok");
    }
  });
  Gateway gateway(options(backend(), {group("up", {upstream.port()})}, "up"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  const auto reply = ask(fd->get(), get("/"), pending);
  EXPECT_EQ(reply.body, "ok");
  EXPECT_EQ(reply.header("x-kept"), "yes");
  EXPECT_FALSE(reply.has_header("x-up"));
  EXPECT_FALSE(reply.has_header("keep-alive"));
  EXPECT_FALSE(reply.has_header("upgrade"));
  EXPECT_FALSE(reply.has_header("connection"));
}

TEST_P(HttpGatewayTest, PooledConnectionsServeManyRequests) {
  Upstream web(backend(), "web");
  START_OR_FAIL(web);
  Gateway gateway(options(backend(), {group("web", {web.port()})}, "web"));
  START_OR_FAIL(gateway);
  for (int client = 0; client < 4; ++client) {  // one client connection after another
    auto fd = test::connect_loopback(gateway.port());
    ASSERT_TRUE(fd);
    std::string pending;
    for (int i = 0; i < 25; ++i) EXPECT_EQ(ask(fd->get(), get("/who"), pending).body, "web");
  }
  EXPECT_EQ(web.accepted(), 1u);  // 100 requests, one upstream connection
}

TEST_P(HttpGatewayTest, StreamsBodiesBothWays) {
  Upstream web(backend(), "web");
  START_OR_FAIL(web);
  Gateway gateway(options(backend(), {group("web", {web.port()})}, "web"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  // A chunked upload the gateway passes on chunked, the echo back with a length.
  std::string body(3 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 23);
  std::string request = "POST /echo HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 100000) {
    const std::string piece = body.substr(at, 100000);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    request += size + piece + "\r\n";
  }
  request += "0\r\n\r\n";
  const auto echoed = ask(fd->get(), request, pending);
  EXPECT_EQ(echoed.status, 200);
  EXPECT_TRUE(echoed.body == body) << echoed.body.size();
  // A chunked answer passed on chunked.
  const auto streamed = ask(fd->get(), get("/stream/2048"), pending);
  EXPECT_TRUE(streamed.chunked);
  EXPECT_EQ(streamed.body, std::string(2048 * 1024, 'z'));
  // To an HTTP/1.0 client the same answer ends with the connection.
  const auto old = ask(fd->get(), "GET /stream/64 HTTP/1.0\r\nHost: g\r\n\r\n", pending);
  EXPECT_TRUE(old.until_close);
  EXPECT_EQ(old.body.size(), 64u * 1024);
}

TEST_P(HttpGatewayTest, NoServerAnsweringIs502AllEjectedIs503ATimeoutIs504) {
  const uint16_t refusing = [] {
    test::ScriptedServer gone([](int) {});
    return gone.port();
  }();
  auto dead = group("dead", {refusing});
  dead.max_fails = 1;
  dead.fail_timeout_ms = 60000;
  test::ScriptedServer silent([](int fd) {
    (void)test::read_head(fd);
    char byte;
    (void)test::recv_some(fd, {&byte, 1}, 3000);
  });
  auto slow = group("slow", {silent.port()});
  slow.idle_timeout_ms = 300;
  Gateway gateway(options(backend(), {dead, slow}, "dead", {{"slow", "*", "/slow", "slow"}}));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  EXPECT_EQ(ask(fd->get(), get("/"), pending).status, 502);  // refused: ejected after it
  EXPECT_EQ(ask(fd->get(), get("/"), pending).status, 503);  // every server ejected
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(ask(fd->get(), get("/slow"), pending).status, 504);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
}

TEST_P(HttpGatewayTest, AmbiguousRequestsNeverReachTheUpstream) {
  std::atomic<int> requests{0};
  test::ScriptedServer upstream([&requests](int fd) {
    while (!test::read_head(fd).empty()) {
      requests.fetch_add(1);
      (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    }
  });
  Gateway gateway(options(backend(), {group("up", {upstream.port()})}, "up"));
  START_OR_FAIL(gateway);
  const char* vectors[] = {
      "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: g\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
      "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: g\r\nHost: h\r\n\r\n",
      "GET / HTTP/1.1\nHost: g\n\n",
  };
  for (const char* vector : vectors) {
    auto fd = test::connect_loopback(gateway.port());
    ASSERT_TRUE(fd);
    ASSERT_TRUE(test::send_text(fd->get(), vector));
    std::string pending;
    auto reply = test::read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply) << vector;
    EXPECT_EQ(reply->status, 400) << vector;
    EXPECT_EQ(reply->header("connection"), "close");
  }
  EXPECT_EQ(requests.load(), 0);
  EXPECT_EQ(upstream.accepted(), 0);
}

TEST_P(HttpGatewayTest, WebSocketPassesThrough) {
  Upstream web(backend(), "web");
  START_OR_FAIL(web);
  Gateway gateway(options(backend(), {group("web", {web.port()})}, "web"));
  START_OR_FAIL(gateway);
  auto socket = test::WsRawClient::open(gateway.port(), "/ws/echo");
  ASSERT_TRUE(socket) << socket.error().message();
  for (const std::string& message : {std::string("hello"), std::string(70000, 'w')}) {
    ASSERT_TRUE(socket->send(test::ws_frame(0x81, message)));
    auto frame = socket->read_frame();
    ASSERT_TRUE(frame) << frame.error().message();
    EXPECT_EQ(frame->payload, message);
  }
  auto closed = socket->close_handshake(1000);
  EXPECT_TRUE(closed) << closed.error().message();
  EXPECT_EQ(gateway->proxy().total().upgrades, 1u);
}

TEST_P(HttpGatewayTest, AnAnswerCutShortResetsTheClient) {
  test::ScriptedServer upstream([](int fd) {
    (void)test::read_head(fd);
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nonly this");
    test::set_reset_on_close(fd);
  });
  Gateway gateway(options(backend(), {group("up", {upstream.port()})}, "up"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  ASSERT_TRUE(test::send_text(fd->get(), get("/")));
  auto reply = test::read_response(fd->get(), pending, 5000);
  EXPECT_FALSE(reply);  // never a complete response: reset (or closed) early, no hang
}

TEST_P(HttpGatewayTest, APooledConnectionItsServerClosedIsNotUsed) {
  // The server answers one request per connection and closes without saying so.
  std::atomic<int> served{0};
  test::ScriptedServer upstream([&served](int fd) {
    if (test::read_head(fd).empty()) return;
    served.fetch_add(1);
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    std::this_thread::sleep_for(20ms);
  });
  Gateway gateway(options(backend(), {group("up", {upstream.port()})}, "up"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ask(fd->get(), get("/"), pending).status, 200) << i;
    if (i % 2 == 0) std::this_thread::sleep_for(100ms);  // closed while pooled
  }
  EXPECT_EQ(served.load(), 5);
}

TEST_P(HttpGatewayTest, ExpectContinueHeadAndHttp10) {
  Upstream web(backend(), "web");
  START_OR_FAIL(web);
  Gateway gateway(options(backend(), {group("web", {web.port()})}, "web"));
  START_OR_FAIL(gateway);
  auto fd = test::connect_loopback(gateway.port());
  ASSERT_TRUE(fd);
  std::string pending;
  ASSERT_TRUE(test::send_text(fd->get(),
                              "POST /echo HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\n"
                              "Expect: 100-continue\r\n\r\n"));
  auto interim = test::read_response(fd->get(), pending, 5000);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  const auto echoed = ask(fd->get(), "hello", pending);
  EXPECT_EQ(echoed.body, "hello");
  const auto head = ask(fd->get(), "HEAD /who HTTP/1.1\r\nHost: g\r\n\r\n", pending, true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "3");
  EXPECT_EQ(head.body, "");
  const auto old = ask(fd->get(), "GET /who HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", pending);
  EXPECT_EQ(old.body, "web");
  EXPECT_EQ(old.header("connection"), "keep-alive");
  EXPECT_EQ(ask(fd->get(), get("/who"), pending).body, "web");  // still the same connection
}

INSTANTIATE_TEST_SUITE_P(Backends, HttpGatewayTest, test::kAllBackends, test::backend_name);

}  // namespace
}  // namespace ucp::proxy
