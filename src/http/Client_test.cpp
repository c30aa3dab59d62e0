// http::Client over loopback, against an in-process HttpServer and scripted raw servers:
// keep-alive reuse, bodies streamed both ways, timeouts as values, redirects, stale pooled
// connections, malformed answers. Runs on both backends.

#include "ucp/http/Client.h"

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ucp/http/ClientSession.h"
#include "ucp/http/ConnectionPool.h"
#include "ucp/http/HttpServer.h"
#include "ucp/io/Operations.h"
#include "ucp/net/TcpClient.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopRunner.h"
#include "ScriptedServer.h"

namespace ucp::http {
namespace {

using namespace std::chrono_literals;

class TestServer {
 public:
  explicit TestServer(HttpOptions http = {}) {
    ::signal(SIGPIPE, SIG_IGN);
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 2000;
    LoopOptions loop;
    loop.backend = test::backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    loop.provided_buffer_size = 4096;
    http.max_body_bytes = 4 << 20;
    server_ = std::make_unique<HttpServer>(options, loop, http);
    routes(server_->router());
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(server_->local_address().port()) +
           std::string(path);
  }
  uint64_t accepted() const {
    uint64_t n = 0;
    for (const auto& s : server_->stats()) n += s.connections_accepted;
    return n;
  }

 private:
  static void routes(Router& router) {
    router.get("/hello", [](Request&, Response& res) -> Task<> {
      res.set_content_type("text/plain");
      res.set_body("Hello, World!");
      co_return;
    });
    router.post("/echo", [](Request& req, Response& res) -> Task<> {
      res.set_body(req.body());
      co_return;
    });
    router.get("/stream/{kib}", [](Request& req, Response& res) -> Task<> {
      const int kib = std::stoi(std::string(req.param("kib")));
      const std::string piece(1024, 's');
      for (int i = 0; i < kib; ++i) {
        if (!co_await res.write(piece)) co_return;
      }
    });
    router.get("/redirect", [](Request&, Response& res) -> Task<> {
      res.set_status(302);
      res.add_header("Location", "/hello");
      co_return;
    });
    router.get("/loop", [](Request&, Response& res) -> Task<> {
      res.set_status(307);
      res.add_header("Location", "loop");
      co_return;
    });
    router.post("/see-other", [](Request&, Response& res) -> Task<> {
      res.set_status(303);
      res.add_header("Location", "/method");
      co_return;
    });
    router.get("/method", [](Request& req, Response& res) -> Task<> {
      res.body_buffer() = std::string(req.method_name()) + " " + std::to_string(req.body().size());
      co_return;
    });
  }
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
    loop_ = test::make_loop(64);
    ASSERT_TRUE(loop_);
  }
  void run(Task<> body) { test::run_to_end(*loop_, std::move(body), 20s); }
  std::unique_ptr<EventLoop> loop_;
};

TEST_F(ClientTest, GetsAndReusesItsKeepAliveConnection) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client client(loop);
    for (int i = 0; i < 5; ++i) {
      auto response = co_await client.get(upstream.url("/hello"));
      EXPECT_TRUE(response) << response.error().message();
      if (!response) co_return;
      EXPECT_EQ(response->status(), 200);
      EXPECT_EQ(response->header("content-type"), "text/plain");
      auto body = co_await response->read_all();
      EXPECT_EQ(body.value_or("?"), "Hello, World!");
    }
    EXPECT_EQ(client.connections_made(), 1u);
    EXPECT_EQ(client.pool().reused(), 4u);
    EXPECT_EQ(client.pool().idle(), 1u);
  }(*loop_, server));
  EXPECT_EQ(server.accepted(), 1u);
}

TEST_F(ClientTest, StreamsARequestBodyChunkedAndWithALength) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client client(loop);
    for (const bool with_length : {false, true}) {
      ClientRequest request;
      request.method = "POST";
      request.url = upstream.url("/echo");
      int pieces = 0;
      std::string piece;
      if (with_length) request.body_length = 300 * 1000;
      request.body_source = [&]() -> Task<Result<std::string_view>> {
        if (pieces == 300) co_return std::string_view();
        piece.assign(1000, static_cast<char>('a' + pieces++ % 26));
        co_return std::string_view(piece);
      };
      auto response = co_await client.send(std::move(request));
      EXPECT_TRUE(response) << response.error().message();
      if (!response) co_return;
      EXPECT_EQ(response->status(), 200);
      auto body = co_await response->read_all();
      EXPECT_TRUE(body);
      if (!body) co_return;
      EXPECT_EQ(body->size(), 300000u);
      EXPECT_EQ(body->substr(1000, 3), "bbb");
    }
  }(*loop_, server));
}

TEST_F(ClientTest, ReadsAStreamedResponsePieceByPiece) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client client(loop);
    auto response = co_await client.get(upstream.url("/stream/4096"));  // 4 MiB, chunked
    EXPECT_TRUE(response) << response.error().message();
    if (!response) co_return;
    EXPECT_EQ(response->head().framing, BodyFraming::kChunked);
    uint64_t total = 0;
    int pieces = 0;
    size_t largest = 0;
    for (;;) {
      auto piece = co_await response->read();
      EXPECT_TRUE(piece) << piece.error().message();
      if (!piece || piece->empty()) break;
      total += piece->size();
      largest = std::max(largest, piece->size());
      ++pieces;
    }
    EXPECT_EQ(total, 4u << 20);
    EXPECT_GT(pieces, 64);          // never the whole body at once...
    EXPECT_LE(largest, 64u << 10);  // ...each piece a receive buffer's worth at most
  }(*loop_, server));
}

TEST_F(ClientTest, ATimeoutIsAnErrorValue) {
  // A server that reads the request and answers nothing.
  test::ScriptedServer silent([](int fd) {
    (void)test::read_head(fd);
    char byte;
    (void)test::recv_some(fd, {&byte, 1}, 3000);
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    ClientOptions options;
    options.timeout_ms = 200;
    Client client(loop, options);
    const auto started = Clock::now();
    auto response = co_await client.get("http://127.0.0.1:" + std::to_string(server_port) + "/");
    EXPECT_FALSE(response);
    if (response) co_return;
    EXPECT_EQ(response.error(), std::errc::timed_out) << response.error().message();
    EXPECT_LT(Clock::now() - started, 2500ms);
  }(*loop_, silent.port()));
}

TEST_F(ClientTest, ARefusedConnectIsAnErrorValue) {
  uint16_t port = 0;
  {
    test::ScriptedServer closed([](int) {});
    port = closed.port();
  }
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    Client client(loop);
    auto response = co_await client.get("http://127.0.0.1:" + std::to_string(server_port) + "/");
    EXPECT_FALSE(response);
    if (!response) {
      EXPECT_EQ(response.error(), std::errc::connection_refused);
    }
  }(*loop_, port));
}

TEST_F(ClientTest, RedirectsAreFollowedOnlyWhenAsked) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client plain(loop);
    auto not_followed = co_await plain.get(upstream.url("/redirect"));
    EXPECT_TRUE(not_followed);
    if (!not_followed) co_return;
    EXPECT_EQ(not_followed->status(), 302);
    EXPECT_EQ(not_followed->header("location"), "/hello");

    ClientOptions options;
    options.max_redirects = 3;
    Client following(loop, options);
    auto followed = co_await following.get(upstream.url("/redirect"));
    EXPECT_TRUE(followed);
    if (!followed) co_return;
    EXPECT_EQ(followed->status(), 200);
    EXPECT_EQ(followed->url(), upstream.url("/hello"));
    EXPECT_EQ((co_await followed->read_all()).value_or("?"), "Hello, World!");

    ClientRequest post;
    post.method = "POST";
    post.url = upstream.url("/see-other");
    post.body = "data";
    auto see_other = co_await following.send(std::move(post));
    EXPECT_TRUE(see_other);
    if (!see_other) co_return;
    EXPECT_EQ((co_await see_other->read_all()).value_or("?"), "GET 0");

    auto endless = co_await following.get(upstream.url("/loop"));
    EXPECT_FALSE(endless);
    if (!endless) {
      EXPECT_EQ(endless.error(), ClientErrc::kTooManyRedirects);
    }
  }(*loop_, server));
}

TEST_F(ClientTest, AConnectionTheServerClosedWhileIdleIsNotReused) {
  HttpOptions http;
  http.keepalive_timeout_ms = 100;
  TestServer server(http);
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client client(loop);
    for (int i = 0; i < 2; ++i) {
      {
        auto response = co_await client.get(upstream.url("/hello"));
        EXPECT_TRUE(response) << response.error().message();
        if (!response) co_return;
        EXPECT_EQ((co_await response->read_all()).value_or("?"), "Hello, World!");
      }  // back to the pool
      if (i == 0) {
        EXPECT_EQ(client.pool().idle(), 1u);
        co_await io::sleep_for(loop, 600ms);  // the server closes it meanwhile
        EXPECT_EQ(client.pool().idle(), 0u);
        EXPECT_EQ(client.pool().closed_by_server(), 1u);
      }
    }
    EXPECT_EQ(client.connections_made(), 2u);
  }(*loop_, server));
}

TEST_F(ClientTest, ARequestMeetingAClosedPooledConnectionIsSentAgain) {
  // The server answers keep-alive, then closes the connection the moment the next request
  // arrives on it, without a byte: the client sends that request again on a new connection.
  test::ScriptedServer server([](int fd) {
    if (test::read_head(fd).empty()) return;
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    (void)test::read_head(fd);  // the second request: dropped with the connection
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    Client client(loop);
    const std::string url = "http://127.0.0.1:" + std::to_string(server_port) + "/";
    for (int i = 0; i < 3; ++i) {
      auto response = co_await client.get(url);
      EXPECT_TRUE(response) << i << ": " << response.error().message();
      if (!response) co_return;
      EXPECT_EQ((co_await response->read_all()).value_or("?"), "ok");
    }
  }(*loop_, server.port()));
  EXPECT_EQ(server.accepted(), 3);
}

TEST_F(ClientTest, MalformedAnswersAreErrors) {
  const char* answers[] = {
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
      "SSH-2.0-OpenSSH_9.2\r\n",
  };
  for (const char* answer : answers) {
    test::ScriptedServer server([answer](int fd) {
      (void)test::read_head(fd);
      (void)test::send_text(fd, answer);
    });
    run([](EventLoop& loop, uint16_t server_port, const char* sent) -> Task<> {
      Client client(loop);
      auto response = co_await client.get("http://127.0.0.1:" + std::to_string(server_port) + "/");
      EXPECT_FALSE(response) << sent;
      if (!response) {
        EXPECT_EQ(response.error(), ClientErrc::kMalformedResponse) << sent;
      }
    }(*loop_, server.port(), answer));
    loop_ = test::make_loop(64);
  }
}

TEST_F(ClientTest, ABodyAlreadyReceivedIsTakenWithoutAWait) {
  // First answer: its body comes with its head. Second: the body comes 50 ms after the head.
  test::ScriptedServer server([](int fd) {
    if (test::read_head(fd).empty()) return;
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
    if (test::read_head(fd).empty()) return;
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n");
    std::this_thread::sleep_for(50ms);
    (void)test::send_text(fd, "second");
    (void)test::read_head(fd);  // until the client closes
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
    EXPECT_TRUE(connection);
    if (!connection) co_return;
    ClientSession session(std::move(*connection));
    const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    EXPECT_TRUE(co_await session.send_head(head, BodyFraming::kNone));
    EXPECT_TRUE(co_await session.read_head(5000));
    auto piece = session.try_read_body();
    EXPECT_TRUE(piece && *piece && **piece == "first");
    auto end = session.try_read_body();
    EXPECT_TRUE(end && *end && (*end)->empty());
    EXPECT_TRUE(session.reusable());

    EXPECT_TRUE(co_await session.send_head(head, BodyFraming::kNone));
    EXPECT_TRUE(co_await session.read_head(5000));
    std::string body;
    for (;;) {
      auto ready = session.try_read_body();
      auto next = ready ? std::move(*ready) : co_await session.read_body(5000);
      EXPECT_TRUE(next);
      if (!next || next->empty()) break;
      body.append(*next);
    }
    EXPECT_EQ(body, "second");
    EXPECT_TRUE(session.reusable());
    // A request before the last response has been read is refused, the session with it.
    EXPECT_TRUE(co_await session.send_head(head, BodyFraming::kNone));
    auto refused = co_await session.send_head(head, BodyFraming::kNone);
    EXPECT_FALSE(refused);
    if (!refused) {
      EXPECT_EQ(refused.error(), std::errc::connection_aborted);
    }
    EXPECT_FALSE(session.reusable());
    co_await session.close();
  }(*loop_, server.port()));
}

TEST_F(ClientTest, PooledConnectionsIdleTooLongAreClosedEachInItsTime) {
  // One timer serves the pool: a connection given back later expires later, one taken back
  // in time does not expire, and an expiry is not the server's doing.
  test::ScriptedServer server([](int fd) {
    while (!test::read_head(fd).empty()) {
      if (!test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
    }
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    ConnectionPool pool(loop, {.max_idle = 8, .max_idle_per_key = 8, .idle_timeout_ms = 300});
    auto fresh = [&]() -> Task<std::unique_ptr<ClientSession>> {
      auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
      EXPECT_TRUE(connection);
      if (!connection) co_return nullptr;
      auto session = std::make_unique<ClientSession>(std::move(*connection));
      const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
      EXPECT_TRUE(co_await session->send_head(head, BodyFraming::kNone));
      EXPECT_TRUE(co_await session->read_head(5000));
      for (;;) {
        auto piece = co_await session->read_body(5000);
        EXPECT_TRUE(piece);
        if (!piece || piece->empty()) break;
      }
      EXPECT_TRUE(session->reusable());
      co_return session;
    };
    auto first = co_await fresh();
    auto second = co_await fresh();
    if (!first || !second) co_return;
    pool.give("a", std::move(first));
    co_await io::sleep_for(loop, 200ms);
    pool.give("b", std::move(second));
    EXPECT_EQ(pool.idle(), 2u);
    co_await io::sleep_for(loop, 200ms);  // "a" idle 400 ms, "b" 200 ms
    EXPECT_EQ(pool.idle("a"), 0u);
    EXPECT_EQ(pool.idle("b"), 1u);
    auto again = co_await pool.take("b");  // in time: handed out, and not expired later
    EXPECT_TRUE(again);
    if (again) pool.give("b", std::move(again));
    co_await io::sleep_for(loop, 200ms);  // given back 200 ms ago
    EXPECT_EQ(pool.idle("b"), 1u);
    co_await io::sleep_for(loop, 300ms);
    EXPECT_EQ(pool.idle(), 0u);
    EXPECT_EQ(pool.closed_by_server(), 0u);
    EXPECT_EQ(co_await pool.take("b"), nullptr);
  }(*loop_, server.port()));
}

// One GET of `path` over `session` and its whole answer; true when the connection may be
// pooled again.
Task<bool> get_over(ClientSession& session, std::string_view path = "/") {
  const std::string head = "GET " + std::string(path) + " HTTP/1.1\r\nHost: a\r\n\r\n";
  if (!co_await session.send_head(head, BodyFraming::kNone)) co_return false;
  if (!co_await session.read_head(5000)) co_return false;
  for (;;) {
    auto piece = co_await session.read_body(5000);
    if (!piece) co_return false;
    if (piece->empty()) co_return session.reusable();
  }
}

// A pooled connection for `key`: at once when one is idle, else through take()'s wait (a loop
// without multishot receives), or none.
Task<std::unique_ptr<ClientSession>> take_pooled(ConnectionPool& pool, std::string_view key) {
  if (auto now = pool.try_take(key)) co_return std::move(*now);
  co_return co_await pool.take(key);
}

TEST_F(ClientTest, APooledConnectionTakenWithoutAWaitIsUsedAtOnceAndMayBeDropped) {
  // try_take() ends the idle receive at once: the connection is read by its next request, or
  // dropped, before the pool's watcher has run again; the watcher then ends without a look at
  // either (ASan: nothing read from a connection gone).
  test::ScriptedServer server([](int fd) {
    while (!test::read_head(fd).empty()) {
      if (!test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
    }
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    ConnectionPool pool(loop, {.max_idle = 8, .max_idle_per_key = 8, .idle_timeout_ms = 5000});
    for (int i = 0; i < 2; ++i) {
      auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
      EXPECT_TRUE(connection);
      if (!connection) co_return;
      auto session = std::make_unique<ClientSession>(std::move(*connection));
      EXPECT_TRUE(co_await get_over(*session));
      pool.give("a", std::move(session));
      for (int round = 0; round < 3; ++round) {
        auto again = co_await take_pooled(pool, "a");
        EXPECT_TRUE(again);
        if (!again) co_return;
        EXPECT_EQ(pool.idle(), static_cast<size_t>(i));  // the first connection, from i = 1
        if (i == 1 && round == 2) break;  // dropped at once: closed in the background
        EXPECT_TRUE(co_await get_over(*again));
        pool.give("a", std::move(again));
      }
    }
    co_await io::sleep_for(loop, 100ms);
    EXPECT_EQ(pool.idle(), 1u);
    EXPECT_EQ(pool.reused(), 6u);
    EXPECT_EQ(pool.closed_by_server(), 0u);
    auto last = co_await take_pooled(pool, "a");
    EXPECT_TRUE(last && co_await get_over(*last));
  }(*loop_, server.port()));
}

TEST_F(ClientTest, AWatcherParkedByATakeSeesTheNextConnectionClosedOrSentToWhileIdle) {
  // A connection taken without a wait leaves its watcher parked, and the next connection given
  // back is watched by it: its server closing it, or sending an answer nobody asked for, drops
  // it as at once as a watcher made for it would (counted as the server's doing, never handed
  // out again).
  test::ScriptedServer server([](int fd) {
    for (;;) {
      const std::string head = test::read_head(fd);
      if (head.empty()) return;
      if (!test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
      if (head.starts_with("GET /close ")) return;  // closed after its answer, while pooled
      if (head.starts_with("GET /stray ")) {
        std::this_thread::sleep_for(50ms);
        (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno");
      }
    }
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    ConnectionPool pool(loop, {.max_idle = 8, .max_idle_per_key = 8, .idle_timeout_ms = 5000});
    uint64_t dropped = 0;
    for (std::string_view path : {"/close", "/stray"}) {
      auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
      EXPECT_TRUE(connection);
      if (!connection) co_return;
      auto session = std::make_unique<ClientSession>(std::move(*connection));
      EXPECT_TRUE(co_await get_over(*session, "/"));
      pool.give("a", std::move(session));
      auto again = co_await take_pooled(pool, "a");  // its watcher parked
      EXPECT_TRUE(again);
      if (!again) co_return;
      EXPECT_TRUE(co_await get_over(*again, path));
      pool.give("a", std::move(again));  // watched by the parked watcher
      ++dropped;
      for (int i = 0; i < 500 && pool.closed_by_server() < dropped; ++i) {
        co_await io::sleep_for(loop, 10ms);
      }
      EXPECT_EQ(pool.closed_by_server(), dropped) << path;
      EXPECT_EQ(pool.idle(), 0u) << path;
      EXPECT_EQ(co_await take_pooled(pool, "a"), nullptr) << path;
    }
    EXPECT_EQ(pool.reused(), 2u);
    // A parked watcher and one watching when the pool goes (ASan: neither frame leaks).
    auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
    EXPECT_TRUE(connection);
    if (!connection) co_return;
    auto session = std::make_unique<ClientSession>(std::move(*connection));
    EXPECT_TRUE(co_await get_over(*session, "/"));
    pool.give("a", std::move(session));
    auto again = co_await take_pooled(pool, "a");
    EXPECT_TRUE(again && co_await get_over(*again, "/"));
    auto other = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
    EXPECT_TRUE(other);
    if (!other || !again) co_return;
    auto second = std::make_unique<ClientSession>(std::move(*other));
    EXPECT_TRUE(co_await get_over(*second, "/"));
    pool.give("a", std::move(again));
    pool.give("b", std::move(second));
    EXPECT_EQ(pool.idle(), 2u);
    auto b = co_await take_pooled(pool, "b");
    EXPECT_TRUE(b);
  }(*loop_, server.port()));
}

TEST_F(ClientTest, NewsThatCameBeforeAConnectionIsGivenBackDropsItEvenWithThePoolGoneAtOnce) {
  // The server closes the connection, or sends an answer nobody asked for, after its answer
  // and before the client gives the connection back: the pool drops it (counted as the
  // server's doing) and, gone at once after the give, is not touched by its watcher later
  // (ASan).
  test::ScriptedServer server([](int fd) {
    const std::string head = test::read_head(fd);
    if (head.empty()) return;
    if (!test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
    if (head.starts_with("GET /stray ")) {
      std::this_thread::sleep_for(20ms);
      (void)test::send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno");
      (void)test::read_head(fd);  // until the client closes it
    }
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    for (std::string_view path : {"/close", "/stray"}) {
      auto connection = co_await TcpClient::connect(loop, "127.0.0.1", server_port);
      EXPECT_TRUE(connection);
      if (!connection) co_return;
      auto session = std::make_unique<ClientSession>(std::move(*connection));
      const std::string head = "GET " + std::string(path) + " HTTP/1.1\r\nHost: a\r\n\r\n";
      EXPECT_TRUE(co_await session->send_head(head, BodyFraming::kNone));
      EXPECT_TRUE(co_await session->read_head(5000));
      for (;;) {
        auto piece = co_await session->read_body(5000);
        EXPECT_TRUE(piece);
        if (!piece || piece->empty()) break;
      }
      EXPECT_TRUE(session->reusable()) << path;
      co_await io::sleep_for(loop, 100ms);  // the close, or the stray answer, arrives
      {
        ConnectionPool pool(loop, {.max_idle = 8, .max_idle_per_key = 8, .idle_timeout_ms = 0});
        pool.give("a", std::move(session));
        if (loop.capabilities().multishot_receive) {  // (the news is queued already)
          EXPECT_EQ(pool.closed_by_server(), 1u) << path;
          EXPECT_EQ(pool.idle(), 0u) << path;
        }
      }
      co_await io::sleep_for(loop, 50ms);  // whatever the watcher still does, done
    }
  }(*loop_, server.port()));
}

TEST_F(ClientTest, ABodyEndedByTheCloseIsReadAndTheConnectionNotReused) {
  test::ScriptedServer server([](int fd) {
    (void)test::read_head(fd);
    (void)test::send_text(fd, "HTTP/1.1 200 OK\r\n\r\nuntil the end");
  });
  run([](EventLoop& loop, uint16_t server_port) -> Task<> {
    Client client(loop);
    const std::string url = "http://127.0.0.1:" + std::to_string(server_port) + "/";
    for (int i = 0; i < 2; ++i) {
      auto response = co_await client.get(url);
      EXPECT_TRUE(response);
      if (!response) co_return;
      EXPECT_EQ((co_await response->read_all()).value_or("?"), "until the end");
    }
    EXPECT_EQ(client.connections_made(), 2u);
  }(*loop_, server.port()));
}

TEST_F(ClientTest, ReadAllIsBounded) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    ClientOptions options;
    options.max_body_bytes = 1000;
    Client client(loop, options);
    auto response = co_await client.get(upstream.url("/stream/8"));
    EXPECT_TRUE(response);
    if (!response) co_return;
    auto body = co_await response->read_all();
    EXPECT_FALSE(body);
    if (!body) {
      EXPECT_EQ(body.error(), ClientErrc::kBodyTooLarge);
    }
  }(*loop_, server));
}

TEST_F(ClientTest, HeadAnswersHaveNoBody) {
  TestServer server;
  run([](EventLoop& loop, TestServer& upstream) -> Task<> {
    Client client(loop);
    for (int i = 0; i < 2; ++i) {
      ClientRequest head;
      head.method = "HEAD";
      head.url = upstream.url("/hello");
      auto response = co_await client.send(std::move(head));
      EXPECT_TRUE(response);
      if (!response) co_return;
      EXPECT_EQ(response->header("content-length"), "13");
      EXPECT_EQ((co_await response->read_all()).value_or("?"), "");
    }
    EXPECT_EQ(client.connections_made(), 1u);
  }(*loop_, server));
}

TEST(ParsedUrl, TakesHttpUrlsApartAndRefusesTheRest) {
  auto url = ParsedUrl::parse("http://Example.COM:8080/a/b?x=1#frag");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "example.com");
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->target, "/a/b?x=1");
  EXPECT_EQ(url->authority(), "example.com:8080");
  auto v6 = ParsedUrl::parse("http://[::1]/");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->authority(), "[::1]");
  EXPECT_EQ(v6->origin(), "http://[::1]:80");
  auto query = ParsedUrl::parse("http://h?q");
  ASSERT_TRUE(query);
  EXPECT_EQ(query->target, "/?q");
  EXPECT_EQ(ParsedUrl::parse("ftp://h/").error(), ClientErrc::kUnsupportedScheme);
  for (const char* bad : {"h/", "http://", "http://u:p@h/", "http://h:0/", "http://h:99999/",
                          "http://h:/", "http://h/a b", "http://[zz]/", "http://h\r\nX: y/"}) {
    auto parsed = ParsedUrl::parse(bad);
    EXPECT_FALSE(parsed) << bad;
  }
}

TEST(RequestHead, RefusesWhatWouldSplitTheRequest) {
  std::string out;
  const Header ok[] = {{"Host", "a"}};
  EXPECT_TRUE(append_request_head(out, "GET", "/", ok, BodyFraming::kLength, 3));
  EXPECT_EQ(out, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n");
  const Header bad_value[] = {{"X", "a\r\nInjected: 1"}};
  const Header bad_name[] = {{"X Y", "a"}};
  std::string unchanged;
  EXPECT_FALSE(append_request_head(unchanged, "GET", "/", bad_value, BodyFraming::kNone));
  EXPECT_FALSE(append_request_head(unchanged, "GET", "/", bad_name, BodyFraming::kNone));
  EXPECT_FALSE(append_request_head(unchanged, "GET", "/ HTTP/1.0", {}, BodyFraming::kNone));
  EXPECT_FALSE(append_request_head(unchanged, "G T", "/", {}, BodyFraming::kNone));
  EXPECT_TRUE(unchanged.empty());
}

}  // namespace
}  // namespace ucp::http
