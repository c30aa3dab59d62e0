// HttpServer over real loopback sockets: an in-process server on a free port, raw clients
// with bounded waits (tests/support). Routing, middleware, keep-alive, pipelining, bodies,
// 100-continue, streams with back-pressure, files, timeouts and the lingering close.

#include "ucp/http/HttpServer.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "Backends.h"
#include "ErrorText.h"
#include "HttpClient.h"
#include "HttpTestServer.h"
#include "LoopbackClient.h"

namespace ucp::http {
namespace {

using namespace std::chrono_literals;
using test::connect_loopback;
using test::read_response;
using test::send_text;

constexpr std::string_view kGet = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";

using TestServer = test::HttpTestServer;

void hello_routes(HttpServer& server) {
  server.router().get("/hello", [](Request&, Response& res) -> Task<> {
    res.set_content_type("text/plain");
    res.set_body("Hello, World!");
    co_return;
  });
  server.router().get("/users/{id}", [](Request& req, Response& res) -> Task<> {
    res.body_buffer() = "user " + std::string(req.param("id"));
    co_return;
  });
  server.router().post("/echo", [](Request& req, Response& res) -> Task<> {
    res.set_content_type(req.header("content-type"));
    res.set_body(req.body());
    co_return;
  });
  server.router().put("/users/{id}", [](Request&, Response& res) -> Task<> {
    res.set_status(204);
    co_return;
  });
  server.router().get("/throw", [](Request&, Response&) -> Task<> {
    throw std::runtime_error("handler bug");
    co_return;
  });
}

using test::ask;

bool closed_by_server(int fd, int64_t timeout_ms = 5000) {
  return static_cast<bool>(test::drain_until_closed(fd, timeout_ms));
}

TEST(HttpServer, RoutesAndAddsDateAndServer) {
  TestServer s(hello_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto hello = ask(fd->get(), kGet, pending);
  EXPECT_EQ(hello.status, 200);
  EXPECT_EQ(hello.body, "Hello, World!");
  EXPECT_EQ(hello.header("content-type"), "text/plain");
  EXPECT_EQ(hello.header("content-length"), "13");
  EXPECT_EQ(hello.header("server"), "ucp");
  EXPECT_EQ(hello.header("date").size(), 29u);
  EXPECT_FALSE(hello.has_header("connection"));  // HTTP/1.1 keep-alive is the default
  EXPECT_EQ(ask(fd->get(), "GET /users/42 HTTP/1.1\r\nHost: a\r\n\r\n", pending).body, "user 42");
  auto missing = ask(fd->get(), "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(missing.status, 404);
  auto wrong = ask(fd->get(), "DELETE /users/1 HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.header("allow"), "GET, HEAD, PUT");
  auto no_content = ask(fd->get(), "PUT /users/1 HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(no_content.status, 204);
  EXPECT_FALSE(no_content.has_header("content-length"));
  // HEAD: GET's headers, Content-Length included, and no body.
  auto head = ask(fd->get(), "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n", pending, true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "13");
  // The connection is still in step: the next answer is the right one.
  EXPECT_EQ(ask(fd->get(), kGet, pending).body, "Hello, World!");
  EXPECT_TRUE(pending.empty());
}

TEST(HttpServer, AnswersAHandlerExceptionWith500AndStaysUsable) {
  TestServer s(hello_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  EXPECT_EQ(ask(fd->get(), "GET /throw HTTP/1.1\r\nHost: a\r\n\r\n", pending).status, 500);
  EXPECT_EQ(ask(fd->get(), kGet, pending).status, 200);
}

TEST(HttpServer, RunsMiddlewareInOrderAroundTheHandler) {
  TestServer s([](HttpServer& server) {
    hello_routes(server);
    server.use([](Request&, Response& res, Next next) -> Task<> {
      res.add_header("X-Outer", "before");
      co_await next();
      res.add_header("X-Outer-After", std::to_string(res.status()));
    });
    server.use([](Request& req, Response& res, Next next) -> Task<> {
      if (req.header("authorization") != "secret") {
        res.set_status(401);
        co_return;  // answered here: the handler never runs
      }
      co_await next();
    });
    server.use(access_log());
  });
  std::string pending;
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  auto denied = ask(fd->get(), kGet, pending);
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.header("x-outer"), "before");
  EXPECT_EQ(denied.header("x-outer-after"), "401");
  auto allowed =
      ask(fd->get(), "GET /hello HTTP/1.1\r\nHost: a\r\nAuthorization: secret\r\n\r\n", pending);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.body, "Hello, World!");
  EXPECT_EQ(allowed.header("x-outer-after"), "200");
  auto missing =
      ask(fd->get(), "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: secret\r\n\r\n", pending);
  EXPECT_EQ(missing.status, 404);  // middleware sees unrouted requests too
  EXPECT_EQ(missing.header("x-outer-after"), "404");
}

TEST(HttpServer, KeepsAliveOrClosesAsTheRequestSays) {
  TestServer s(hello_routes);
  std::string pending;
  {  // HTTP/1.0 without keep-alive: answered, then closed.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    auto reply = ask(fd->get(), "GET /hello HTTP/1.0\r\n\r\n", pending);
    EXPECT_EQ(reply.header("connection"), "close");
    EXPECT_TRUE(closed_by_server(fd->get()));
  }
  {  // HTTP/1.0 with keep-alive: stays open, and says so.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    pending.clear();
    auto reply = ask(fd->get(), "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", pending);
    EXPECT_EQ(reply.header("connection"), "keep-alive");
    EXPECT_EQ(
        ask(fd->get(), "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", pending).status,
        200);
  }
  {  // "close" anywhere in a Connection list ends it.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    pending.clear();
    auto reply = ask(
        fd->get(),
        "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: y, close\r\n\r\n", pending);
    EXPECT_EQ(reply.header("connection"), "close");
    EXPECT_TRUE(closed_by_server(fd->get()));
  }
}

TEST(HttpServer, AnswersPipelinedRequestsInOrder) {
  TestServer s(hello_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string batch;
  for (int i = 0; i < 100; ++i)
    batch += "GET /users/" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n";
  ASSERT_TRUE(send_text(fd->get(), batch));
  std::string pending;
  for (int i = 0; i < 100; ++i) {
    auto reply = read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply) << i;
    EXPECT_EQ(reply->body, "user " + std::to_string(i));
  }
}

// The same pipelined bytes, split into two sends at every offset: the same answers.
TEST(HttpServer, GivesIdenticalAnswersWhereverPipelinedRequestsAreSplit) {
  TestServer s(hello_routes);
  const std::string batch =
      "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type: text/x\r\nContent-Length: 5\r\n\r\nhello"
      "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
      "GET /users/7 HTTP/1.1\r\nHost: a\r\n\r\n";
  auto answers = [&](size_t split) {
    std::string all;
    auto fd = connect_loopback(s.port());
    EXPECT_TRUE(fd);
    if (!fd) return all;
    EXPECT_TRUE(send_text(fd->get(), std::string_view(batch).substr(0, split)));
    if (split < batch.size()) {
      std::this_thread::sleep_for(1ms);  // two reads on the server, most of the time
      EXPECT_TRUE(send_text(fd->get(), std::string_view(batch).substr(split)));
    }
    std::string pending;
    for (int i = 0; i < 4; ++i) {
      auto reply = read_response(fd->get(), pending, 5000);
      EXPECT_TRUE(reply) << "split " << split << " answer " << i;
      if (reply) all += reply->without_date() + "\n--\n";
    }
    return all;
  };
  const std::string whole = answers(batch.size());
  EXPECT_NE(whole.find("hello"), std::string::npos);
  for (size_t split = 1; split < batch.size(); ++split) {
    ASSERT_EQ(answers(split), whole) << "split at " << split;
  }
}

TEST(HttpServer, ReadsContentLengthAndChunkedBodies) {
  TestServer s(hello_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto plain =
      ask(fd->get(),
          "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type: a/b\r\nContent-Length: 3\r\n\r\nabc",
          pending);
  EXPECT_EQ(plain.body, "abc");
  EXPECT_EQ(plain.header("content-type"), "a/b");
  auto chunked = ask(fd->get(),
                     "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n",
                     pending);
  EXPECT_EQ(chunked.body, "Wikipedia");
  // A body larger than a receive buffer, sent in pieces.
  const std::string big(300000, 'z');
  ASSERT_TRUE(send_text(fd->get(), "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: " +
                                       std::to_string(big.size()) + "\r\n\r\n"));
  ASSERT_TRUE(send_text(fd->get(), big));
  auto reply = read_response(fd->get(), pending, 10000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body.size(), big.size());
  EXPECT_EQ(reply->body, big);
}

TEST(HttpServer, SendsContinueBeforeReadingAnExpectedBody) {
  TestServer s(hello_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(
      fd->get(),
      "POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  std::string pending;
  auto interim = read_response(fd->get(), pending, 5000);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(send_text(fd->get(), "body"));
  auto final = read_response(fd->get(), pending, 5000);
  ASSERT_TRUE(final);
  EXPECT_EQ(final->status, 200);
  EXPECT_EQ(final->body, "body");
  // Too large: 413 at once, without 100, and the connection closes.
  auto big = connect_loopback(s.port());
  ASSERT_TRUE(big);
  pending.clear();
  auto refused = ask(
      big->get(),
      "POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n\r\n",
      pending);
  EXPECT_EQ(refused.status, 413);
  EXPECT_EQ(refused.header("connection"), "close");
  EXPECT_TRUE(closed_by_server(big->get()));
}

TEST(HttpServer, RefusesMalformedRequestsWith400AndCloses) {
  TestServer s(hello_routes);
  for (const std::string request :
       {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n"}) {
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    std::string pending;
    auto reply = ask(fd->get(), request, pending);
    EXPECT_EQ(reply.status, 400) << request;
    EXPECT_EQ(reply.header("connection"), "close");
    EXPECT_TRUE(closed_by_server(fd->get()));
  }
}

TEST(HttpServer, AnswersValidRequestsBeforeARefusedOne) {
  HttpOptions http;
  http.max_request_line_bytes = 256;
  TestServer s(hello_routes, http);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  const std::string batch = std::string(kGet) + std::string(kGet) + "GET /" +
                            std::string(400, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n" +
                            std::string(kGet);
  ASSERT_TRUE(send_text(fd->get(), batch));
  std::string pending;
  for (int expected : {200, 200, 414}) {
    auto reply = read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, expected);
  }
  EXPECT_TRUE(closed_by_server(fd->get()));
}

TEST(HttpServer, StreamsChunkedOrWithALengthOrUntilClose) {
  TestServer s([](HttpServer& server) {
    server.router().get("/stream", [](Request&, Response& res) -> Task<> {
      res.set_content_type("text/plain");
      for (int i = 0; i < 5; ++i) {
        if (!co_await res.write("part " + std::to_string(i) + "\n")) co_return;
      }
    });
    server.router().get("/sized", [](Request&, Response& res) -> Task<> {
      res.set_content_length(10);
      if (!co_await res.write("01234")) co_return;
      if (!co_await res.write("56789")) co_return;
      auto extra = co_await res.write("!");
      res.add_header("X-Ignored", "late");  // the head is gone: no effect on the wire
      if (extra) throw std::logic_error("wrote past Content-Length");
    });
  });
  std::string expected;
  for (int i = 0; i < 5; ++i) expected += "part " + std::to_string(i) + "\n";
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto chunked = ask(fd->get(), "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_TRUE(chunked.chunked);
  EXPECT_EQ(chunked.body, expected);
  auto sized = ask(fd->get(), "GET /sized HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(sized.header("content-length"), "10");
  EXPECT_EQ(sized.body, "0123456789");
  auto head = ask(fd->get(), "HEAD /stream HTTP/1.1\r\nHost: a\r\n\r\n", pending, true);
  EXPECT_EQ(head.header("transfer-encoding"), "chunked");
  EXPECT_EQ(ask(fd->get(), "GET /sized HTTP/1.1\r\nHost: a\r\n\r\n", pending).body, "0123456789");
  // HTTP/1.0 has no chunked coding: the body ends with the connection.
  auto old = connect_loopback(s.port());
  ASSERT_TRUE(old);
  pending.clear();
  auto until_close = ask(old->get(), "GET /stream HTTP/1.0\r\n\r\n", pending);
  EXPECT_TRUE(until_close.until_close);
  EXPECT_EQ(until_close.body, expected);
}

// A stream to a client that does not read waits at the output queue's bound instead of
// buffering: the handler is held back until the client reads, and then everything arrives.
TEST(HttpServer, HoldsAStreamBackWhileTheClientDoesNotRead) {
  constexpr size_t kChunk = 16 * 1024;
  constexpr size_t kChunks = 1024;  // 16 MiB in all
  constexpr uint64_t kQueue = 64 * 1024;
  std::atomic<size_t> written{0};
  TestServer s(
      [&written](HttpServer& server) {
        server.router().get("/big", [&written](Request&, Response& res) -> Task<> {
          const std::string chunk(kChunk, 'x');
          for (size_t i = 0; i < kChunks; ++i) {
            if (!co_await res.write(chunk)) co_return;
            written.fetch_add(kChunk);
          }
        });
      },
      HttpOptions{}, kQueue);
  auto fd = connect_loopback(s.port(), 5000, 16 * 1024);
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"));
  // Wait until the handler stops advancing (socket buffers and the queue are full).
  size_t last = 0;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    const size_t now = written.load();
    if (now == last && now > 0) break;
    last = now;
  }
  const size_t stalled = written.load();
  EXPECT_LT(stalled, 8u * 1024 * 1024) << "the stream ran ahead of the client";
  std::string pending;
  auto reply = read_response(fd->get(), pending, 30000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body.size(), kChunk * kChunks);
  EXPECT_EQ(written.load(), kChunk * kChunks);
}

TEST(HttpServer, ClosesAConnectionWhoseClientStopsReading) {
  HttpOptions http;
  http.send_timeout_ms = 300;
  std::atomic<bool> failed{false};
  std::atomic<bool> finished{false};
  TestServer s(
      [&](HttpServer& server) {
        server.router().get("/flood", [&](Request&, Response& res) -> Task<> {
          const std::string chunk(64 * 1024, 'x');
          for (int i = 0; i < 100000; ++i) {
            if (!co_await res.write(chunk)) {
              failed = true;
              break;
            }
          }
          finished = true;
        });
      },
      http, 256 * 1024);
  auto fd = connect_loopback(s.port(), 5000, 16 * 1024);
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET /flood HTTP/1.1\r\nHost: a\r\n\r\n"));
  for (int i = 0; i < 500 && !finished; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(finished) << "the stalled stream was never ended";
  EXPECT_TRUE(failed);
  EXPECT_TRUE(closed_by_server(fd->get(), 10000));
}

TEST(HttpServer, SendsFilesInBoundedPieces) {
  const std::string path = testing::TempDir() + "ucp_http_file_" + std::to_string(::getpid());
  std::string content(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('a' + i % 23);
  std::ofstream(path, std::ios::binary) << content;
  TestServer s([&path](HttpServer& server) {
    server.router().get("/file/{from}/{length}", [&path](Request& req, Response& res) -> Task<> {
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      res.set_file(std::move(fd), std::stoull(std::string(req.param("from"))),
                   std::stoull(std::string(req.param("length"))));
      co_return;
    });
  });
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto whole = ask(fd->get(),
                   "GET /file/0/" + std::to_string(content.size()) + " HTTP/1.1\r\nHost: a\r\n\r\n",
                   pending);
  EXPECT_EQ(whole.body.size(), content.size());
  EXPECT_TRUE(whole.body == content);
  auto small = ask(fd->get(), "GET /file/5/100 HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(small.body, content.substr(5, 100));
  // Large (the send-file operation) and small (read and queued) pipelined in one write, at
  // odd offsets: each answer whole and in order.
  ASSERT_TRUE(send_text(fd->get(),
                        "GET /file/12345/1000000 HTTP/1.1\r\nHost: a\r\n\r\n"
                        "GET /file/7/70000 HTTP/1.1\r\nHost: a\r\n\r\n"
                        "GET /file/3/3 HTTP/1.1\r\nHost: a\r\n\r\n"));
  for (auto [from, length] : {std::pair<size_t, size_t>{12345, 1000000}, {7, 70000}, {3, 3}}) {
    auto reply = read_response(fd->get(), pending, 5000, false);
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_TRUE(reply->body == content.substr(from, length)) << from << "+" << length;
  }
  // A file shorter than announced: the connection closes instead of hanging.
  auto cut =
      ask(fd->get(),
          "GET /file/" + std::to_string(content.size() - 10) + "/100 HTTP/1.1\r\nHost: a\r\n\r\n",
          pending, true);
  EXPECT_EQ(cut.header("content-length"), "100");
  EXPECT_TRUE(closed_by_server(fd->get()));
  // The same through the send-file operation (a large body).
  auto again = connect_loopback(s.port());
  ASSERT_TRUE(again);
  pending.clear();
  const size_t late = content.size() - 100000;
  auto large_cut =
      ask(again->get(), "GET /file/" + std::to_string(late) + "/300000 HTTP/1.1\r\nHost: a\r\n\r\n",
          pending, true);
  EXPECT_EQ(large_cut.header("content-length"), "300000");
  EXPECT_TRUE(closed_by_server(again->get()));
  std::filesystem::remove(path);
}

// A large file goes out through the send-file operation, which the send timeout bounds too: a
// client that stops reading is closed, one that reads slowly but steadily gets every byte.
TEST(HttpServer, SendTimeoutBoundsLargeFilesButNotASteadyReader) {
  const std::string path = testing::TempDir() + "ucp_http_slow_" + std::to_string(::getpid());
  std::string content(32 * 1024 * 1024, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('A' + i % 29);
  std::ofstream(path, std::ios::binary) << content;
  HttpOptions http;
  http.send_timeout_ms = 500;
  TestServer s(
      [&path](HttpServer& server) {
        server.router().get("/big/{length}", [&path](Request& req, Response& res) -> Task<> {
          res.set_file(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), 0,
                       std::stoull(std::string(req.param("length"))));
          co_return;
        });
      },
      http);
  {
    auto stalled = connect_loopback(s.port(), 5000, 16 * 1024);
    ASSERT_TRUE(stalled);
    ASSERT_TRUE(send_text(stalled->get(), "GET /big/8388608 HTTP/1.1\r\nHost: a\r\n\r\n"));
    // The server gives up (its connection ends) while this client reads nothing; what was
    // already in the socket buffers then arrives, and the close, short of the whole file.
    auto open_connections = [&s] {
      uint64_t open = 0;
      for (const WorkerStats& w : s.server().stats()) open += w.connections_open;
      return open;
    };
    for (int i = 0; i < 500 && open_connections() == 0; ++i) std::this_thread::sleep_for(10ms);
    for (int i = 0; i < 1000 && open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(open_connections(), 0u) << "a client that reads nothing was not closed in 10 s";
    auto rest = test::drain_until_closed(stalled->get(), 10000);
    ASSERT_TRUE(rest) << rest.error().message();
    EXPECT_LT(*rest, content.size());
  }
  auto steady = connect_loopback(s.port());
  ASSERT_TRUE(steady);
  ASSERT_TRUE(send_text(steady->get(), "GET /big/33554432 HTTP/1.1\r\nHost: a\r\n\r\n"));
  // At most 128 KiB every 10 ms: over 2.5 s for 32 MiB (more than both socket buffers hold),
  // several send-timeout windows, none without progress (a gap 50 times the reader's pause,
  // which a loaded machine does not stretch that far). The client's receive buffer keeps the
  // kernel's size: a tiny one makes loopback drop segments, and a retransmission back-off is a
  // window without progress.
  constexpr size_t kSteady = 32 * 1024 * 1024;
  std::string all;
  std::vector<char> buffer(128 * 1024);
  for (int i = 0; i < 10000 && all.size() < kSteady + 200; ++i) {
    std::this_thread::sleep_for(10ms);
    auto n = test::recv_some(steady->get(), buffer, 5000);
    if (!n || *n == 0) break;
    all.append(buffer.data(), *n);
  }
  const size_t body_at = all.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  EXPECT_EQ(all.size() - body_at - 4, kSteady);
  EXPECT_TRUE(all.substr(body_at + 4) == content.substr(0, kSteady));
  std::filesystem::remove(path);
}

// A stop while a large file is on its way to a client that reads nothing: the send-file
// operation is cancelled with the connection and the server stops (within the shutdown
// timeout, long before the 60 s send timeout).
TEST(HttpServer, StopsWhileALargeFileWaitsForAStalledClient) {
  const std::string path = testing::TempDir() + "ucp_http_stop_" + std::to_string(::getpid());
  std::ofstream(path, std::ios::binary) << std::string(8 * 1024 * 1024, 's');
  auto s = std::make_unique<TestServer>([&path](HttpServer& server) {
    server.router().get("/big", [&path](Request&, Response& res) -> Task<> {
      res.set_file(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), 0, 8 * 1024 * 1024);
      co_return;
    });
  });
  auto fd = connect_loopback(s->port(), 5000, 16 * 1024);
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"));
  // The head has arrived: the body is under way.
  ASSERT_TRUE(test::wait_for(fd->get(), POLLIN, test::Deadline(5000)));
  auto stopping = std::async(std::launch::async, [&s] { s.reset(); });
  EXPECT_EQ(stopping.wait_for(30s), std::future_status::ready) << "the server did not stop";
  stopping.get();
  std::filesystem::remove(path);
}

TEST(HttpServer, TimesOutSlowHeadsAndIdleConnections) {
  HttpOptions http;
  http.header_timeout_ms = 300;
  http.keepalive_timeout_ms = 300;
  TestServer s(hello_routes, http);
  {  // A head that never ends: 408, then the close, however the bytes trickle in.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    ASSERT_TRUE(send_text(fd->get(), "GET /hello HTTP/1.1\r\nHost: a\r\n"));
    std::string pending;
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(50ms);
      (void)send_text(fd->get(), "X-Slow: 1\r\n");
    }
    auto reply = read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 408);
    EXPECT_TRUE(closed_by_server(fd->get()));
  }
  {  // Idle after a request: closed without a word.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    std::string pending;
    EXPECT_EQ(ask(fd->get(), kGet, pending).status, 200);
    auto rest = test::drain_until_closed(fd->get(), 5000);
    ASSERT_TRUE(rest);
    EXPECT_EQ(*rest, 0u);
  }
  {  // A connection that never sends a byte.
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    auto rest = test::drain_until_closed(fd->get(), 5000);
    ASSERT_TRUE(rest);
    EXPECT_EQ(*rest, 0u);
  }
}

// After refusing a request whose body is still coming, the server reads and drops the rest
// before closing, so the client gets the answer rather than a reset.
TEST(HttpServer, LingersAfterAnErrorSoTheClientReadsIt) {
  HttpOptions http;
  http.max_body_bytes = 1024;
  TestServer s(hello_routes, http);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  const std::string body(2 * 1024 * 1024, 'b');
  ASSERT_TRUE(send_text(fd->get(), "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: " +
                                       std::to_string(body.size()) + "\r\n\r\n"));
  // Keep sending the body while the server has already answered.
  (void)send_text(fd->get(), body, 5000);
  std::string pending;
  auto reply = read_response(fd->get(), pending, 5000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->status, 413);
  EXPECT_TRUE(closed_by_server(fd->get()));
}

TEST(HttpServer, CountsPerWorker) {
  TestServer s(hello_routes);
  const std::string requests[] = {std::string(kGet), "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n",
                                  "GET /throw HTTP/1.1\r\nHost: a\r\n\r\n"};
  {
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    std::string pending;
    for (const auto& request : requests) ask(fd->get(), request, pending);
  }
  std::vector<WorkerStats> stats;
  for (int i = 0; i < 200; ++i) {  // the close is counted on the worker, a moment later
    stats = s.server().stats();
    if (stats.size() == 1 && stats[0].connections_open == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].connections_accepted, 1u);
  EXPECT_EQ(stats[0].connections_open, 0u);
  EXPECT_EQ(stats[0].responses[0], 1u);
  EXPECT_EQ(stats[0].responses[2], 1u);
  EXPECT_EQ(stats[0].responses[3], 1u);
  EXPECT_EQ(stats[0].bytes_received, requests[0].size() + requests[1].size() + requests[2].size());
  EXPECT_GT(stats[0].bytes_sent, 0u);
}

/// A route that switches the connection to a byte echo, so that what the HTTP layer hands over
/// (the 101, the bytes after the request, the connection) shows on the wire.
void switching_routes(HttpServer& server) {
  hello_routes(server);
  server.router().get("/raw", [](Request&, Response& res) -> Task<> {
    res.add_header("Upgrade", "echo");
    res.switch_protocols([](TcpConnection& conn, BufferLease& received) -> Task<> {
      if (!received.empty() && !co_await conn.write_all(received.bytes())) co_return;
      for (;;) {
        auto data = co_await conn.receive();
        if (!data || data->empty()) co_return;
        if (!co_await conn.write_all(data->bytes())) co_return;
      }
    });
    co_return;
  });
  server.router().get("/bare101", [](Request&, Response& res) -> Task<> {
    res.set_status(101);  // without switch_protocols(): a handler bug
    co_return;
  });
  // A middleware that refuses /raw?deny after the handler switched: an ordinary answer.
  server.use([](Request& req, Response& res, Next next) -> Task<> {
    co_await next();
    if (req.query() == "deny") {
      res.set_status(403);
      res.set_body("denied\n");
    }
  });
}

TEST(HttpServer, HandsTheConnectionOverAfterA101) {
  TestServer s(switching_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  // A keep-alive request first: the connection is HTTP until the switch.
  EXPECT_EQ(ask(fd->get(), kGet, pending).body, "Hello, World!");
  // The switch, with bytes of the new protocol in the same write.
  ASSERT_TRUE(send_text(fd->get(), "GET /raw HTTP/1.1\r\nHost: a\r\n\r\nearly bytes"));
  auto reply = read_response(fd->get(), pending, 5000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->status, 101);
  EXPECT_EQ(reply->header("connection"), "Upgrade");
  EXPECT_EQ(reply->header("upgrade"), "echo");
  EXPECT_FALSE(reply->has_header("content-length"));
  ASSERT_TRUE(test::detail::fill(fd->get(), pending, 11, test::Deadline(5000)));
  EXPECT_EQ(pending, "early bytes");
  // No more HTTP: a request line is just bytes to echo now.
  const std::string not_http = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
  char echoed[64];
  ASSERT_TRUE(test::echo_round_trip(fd->get(), not_http, echoed));
  // Counted as open while the new protocol runs, closed after.
  EXPECT_EQ(s.server().stats()[0].connections_open, 1u);
  fd->reset();
  std::vector<WorkerStats> stats;
  for (int i = 0; i < 200; ++i) {
    stats = s.server().stats();
    if (stats[0].connections_open == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(stats[0].connections_open, 0u);
  EXPECT_EQ(stats[0].connections_accepted, 1u);
  EXPECT_GT(stats[0].bytes_received, not_http.size() + 11);
}

/// Set when the UpgradeHandler object of a /keep route is destroyed.
std::atomic<bool> switch_closure_destroyed{false};

/// A capture that says when the handler object holding it goes.
struct ClosureWitness {
  bool live = true;
  ClosureWitness() = default;
  ClosureWitness(ClosureWitness&& other) noexcept : live(std::exchange(other.live, false)) {}
  ClosureWitness& operator=(ClosureWitness&&) = delete;
  ~ClosureWitness() {
    if (live) switch_closure_destroyed = true;
  }
};

/// Takes the bytes received (before its first suspension), echoes them, then answers every
/// read with whether the handler object is gone ("1") or still kept ("0").
Task<> report_closure(TcpConnection& conn, BufferLease& received) {
  BufferLease early = std::move(received);
  if (!early.empty() && !co_await conn.write_all(early.bytes())) co_return;
  for (;;) {
    auto data = co_await conn.receive();
    if (!data || data->empty()) co_return;
    const char* answer = switch_closure_destroyed ? "1" : "0";
    if (!co_await conn.write_all(std::span(answer, 1))) co_return;
  }
}

void keep_routes(HttpServer& server) {
  for (const auto& [path, keep] : {std::pair{"/keep/return", UpgradeKeep::kUntilReturn},
                                   std::pair{"/keep/started", UpgradeKeep::kUntilStarted}}) {
    server.router().get(path, [keep](Request&, Response& res) -> Task<> {
      res.add_header("Upgrade", "report");
      res.switch_protocols(
          [witness = ClosureWitness()](TcpConnection& conn, BufferLease& received) {
            return report_closure(conn, received);
          },
          keep);
      co_return;
    });
  }
}

TEST(HttpServer, KeepsTheSwitchHandlerAsLongAsItsUpgradeKeepSays) {
  TestServer s(keep_routes);
  for (const auto& [path, gone] :
       {std::pair{"/keep/return", '0'}, std::pair{"/keep/started", '1'}}) {
    SCOPED_TRACE(path);
    switch_closure_destroyed = false;
    auto fd = connect_loopback(s.port());
    ASSERT_TRUE(fd);
    std::string pending;
    const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: a\r\n\r\nearly";
    ASSERT_TRUE(send_text(fd->get(), request));
    auto reply = read_response(fd->get(), pending, 5000);
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_EQ(reply->status, 101);
    // The bytes after the request reached the handler either way.
    ASSERT_TRUE(test::detail::fill(fd->get(), pending, 5, test::Deadline(5000)));
    EXPECT_EQ(pending, "early");
    pending.clear();
    // The handler is suspended in receive() now: its object is gone only with kUntilStarted.
    ASSERT_TRUE(send_text(fd->get(), "?"));
    ASSERT_TRUE(test::detail::fill(fd->get(), pending, 1, test::Deadline(5000)));
    EXPECT_EQ(pending[0], gone);
  }
}

TEST(HttpServer, AnswersOrdinarilyWhenTheSwitchIsOverruled) {
  TestServer s(switching_routes);
  auto fd = connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto denied = ask(fd->get(), "GET /raw?deny HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.body, "denied\n");
  EXPECT_FALSE(denied.has_header("connection"));
  auto bare = ask(fd->get(), "GET /bare101 HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(bare.status, 500);
  EXPECT_EQ(ask(fd->get(), kGet, pending).body, "Hello, World!");  // still HTTP
}

TEST(HttpServer, StopsWithIdleKeepAliveConnectionsOpen) {
  auto s = std::make_unique<TestServer>(hello_routes);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 20; ++i) {
    auto fd = connect_loopback(s->port());
    ASSERT_TRUE(fd);
    std::string pending;
    ask(fd->get(), kGet, pending);
    idle.push_back(std::move(*fd));
  }
  s.reset();  // stop() and join: the idle connections do not wait for keepalive_timeout_ms
  for (auto& fd : idle) EXPECT_TRUE(closed_by_server(fd.get(), 1000));
}

// A takeover's drain: the server stops accepting (here nobody else holds the socket, so new
// connections are refused), and a keep-alive connection's next answer carries
// Connection: close, after which the server closes it.
TEST(HttpServer, DrainStopsAcceptingAndEndsKeepAliveAfterTheNextAnswer) {
  TestServer s(hello_routes);
  std::string pending;
  auto kept = connect_loopback(s.port());
  ASSERT_TRUE(kept);
  EXPECT_NE(ask(kept->get(), kGet, pending).header("connection"), "close");
  EXPECT_FALSE(s.server().tcp().draining());
  s.server().drain();
  EXPECT_TRUE(s.server().tcp().draining());
  bool refused = false;
  for (int i = 0; i < 500 && !refused; ++i) {  // the drain runs on the main loop, soon
    refused = !connect_loopback(s.port(), 1000);
    if (!refused) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(refused) << "still accepting after drain()";
  const auto reply = ask(kept->get(), kGet, pending);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.header("connection"), "close");
  EXPECT_TRUE(closed_by_server(kept->get()));
}

}  // namespace
}  // namespace ucp::http
