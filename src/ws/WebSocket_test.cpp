// WebSocket over real loopback sockets, on both backends (ctest runs it once per backend): an
// in-process HttpServer with WebSocket routes, driven by a raw client that sends exactly the bytes
// a rule is about (tests/support/WsRawClient.h) and by UCP's own client. One test per RFC 6455 rule
// the server enforces, with the close code it answers; the handshake's refusals; control frames;
// the close handshake both ways; keep-alive; limits; permessage-deflate; back-pressure and the end
// of everything a connection held.

#include "ucp/ws/WebSocket.h"

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <zlib.h>

#include "ucp/coro/WhenAll.h"
#include "ucp/http/HttpServer.h"
#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/ws/Accept.h"

#include "Backends.h"
#include "Deflate.h"
#include "ErrorText.h"
#include "Handshake.h"
#include "LoopRunner.h"
#include "WsRawClient.h"

namespace ucp::ws {
namespace {

using namespace std::chrono_literals;
using test::ws_close_payload;
using test::ws_frame;
using test::WsRawClient;

constexpr uint8_t kFin = 0x80;

/// What the server's handlers saw, for the test thread to check.
class Journal {
 public:
  void add(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
    changed_.notify_all();
  }
  /// Waits (bounded) for a line that starts with `prefix` and takes it out (the next wait
  /// finds the next such line); returns it, or "" on timeout.
  std::string wait_for(std::string_view prefix, std::chrono::milliseconds limit = 10s) {
    return wait_for_any({prefix}, limit);
  }
  /// The same for a line that starts with any of `prefixes`.
  std::string wait_for_any(std::initializer_list<std::string_view> prefixes,
                           std::chrono::milliseconds limit = 10s) {
    std::unique_lock lock(mutex_);
    std::string found;
    changed_.wait_for(lock, limit, [&] {
      for (auto line = lines_.begin(); line != lines_.end(); ++line) {
        bool match = false;
        for (std::string_view prefix : prefixes) match = match || line->rfind(prefix, 0) == 0;
        if (match) {
          found = std::move(*line);
          lines_.erase(line);
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> lines_;
};

std::string describe_end(const std::error_code& error, WebSocket& ws) {
  std::string why = error.category() == ws_category() ? "ws" : "sys";
  return "end:" + why + std::to_string(error.value()) + ":" + std::to_string(ws.close_code()) +
         ":" + std::string(ws.close_reason());
}

/// An HttpServer with WebSocket routes on 127.0.0.1:<free port>, on a thread of its own:
///   /echo      echoes every message (same kind) and journals how it ended
///   /journal   journals every message ("msg:<text>") and the end
///   /bye       returns at once: the server closes (1000)
///   /throw     throws: the server closes with 1011
class WsServer {
 public:
  WsServer(BackendKind backend, Options options = {}, http::HttpOptions http = {},
           uint64_t max_output_bytes = 4 << 20) {
    ::signal(SIGPIPE, SIG_IGN);
    ServerOptions server;
    server.ip = "127.0.0.1";
    server.port = 0;
    server.thread_num = 1;
    server.shutdown_timeout_ms = 2000;
    server.max_output_bytes = max_output_bytes;
    LoopOptions loop;
    loop.backend = backend;
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    loop.provided_buffer_size = 4096;
    server_ = std::make_unique<http::HttpServer>(server, loop, http);
    Journal* journal = &journal_;
    auto& routes = server_->router();
    routes.get("/echo", upgrade(options, [journal](WebSocket& ws) -> Task<> {
                 for (;;) {
                   auto message = co_await ws.receive();
                   if (!message) {
                     journal->add(describe_end(message.error(), ws));
                     co_return;
                   }
                   if (auto sent = co_await ws.send(message->kind, message->data); !sent) {
                     journal->add("send failed: " + sent.error().message());
                     co_return;
                   }
                 }
               }));
    routes.get("/journal", upgrade(options, [journal](WebSocket& ws) -> Task<> {
                 journal->add("open:" + std::string(ws.subprotocol()) +
                              (ws.compressed() ? ":deflate" : ""));
                 for (;;) {
                   auto message = co_await ws.receive();
                   if (!message) {
                     journal->add(describe_end(message.error(), ws));
                     co_return;
                   }
                   journal->add("msg:" + std::string(message->text()));
                 }
               }));
    routes.get("/bye", upgrade(options, [](WebSocket&) -> Task<> { co_return; }));
    // A chat room (examples/ws_chat.cpp): each text goes to every other member, sent from the
    // sender's coroutine into the others' connections.
    Room* room = &room_;
    routes.get("/room", upgrade(options, [room](WebSocket& ws) -> Task<> {
                 auto me = std::make_shared<Member>(Member{ws});
                 room->push_back(me);
                 while (auto message = co_await ws.receive()) {
                   const std::string text(message->text());
                   for (auto member : Room(*room)) {
                     if (member != me && !member->gone) co_await member->ws.send_text(text);
                   }
                 }
                 me->gone = true;
                 std::erase(*room, me);
               }));
    routes.get("/throw", upgrade(options, [](WebSocket&) -> Task<> {
                 throw std::runtime_error("handler bug");
                 co_return;
               }));
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~WsServer() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }
  Journal& journal() { return journal_; }
  /// Waits (bounded) until no connection is open: everything a connection held is gone.
  bool all_closed(std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (server_->stats()[0].connections_open == 0) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

 private:
  struct Member {
    WebSocket& ws;
    bool gone = false;
  };
  using Room = std::vector<std::shared_ptr<Member>>;
  Journal journal_;
  Room room_;  // touched by the server's one worker loop only
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
};

class WebSocketTest : public ::testing::Test {
 protected:
  /// Opens /path on `server` with the raw client (101 expected).
  WsRawClient open(WsServer& server, std::string_view path = "/echo",
                   std::string_view headers = "") {
    auto ws = WsRawClient::open(server.port(), path, headers);
    EXPECT_TRUE(ws) << ws.error().message();
    if (!ws) std::abort();
    return std::move(*ws);
  }

  /// Sends `bytes` and expects the server to fail the connection with `code`: a close frame
  /// with it, then the end of the TCP connection; the handler's receive() reports `errc`.
  void expect_failure(WsServer& server, std::string_view bytes, uint16_t code, Errc errc,
                      std::string_view path = "/echo") {
    WsRawClient ws = open(server, path);
    ASSERT_TRUE(ws.send(bytes));
    auto close = ws.read_close();
    ASSERT_TRUE(close) << close.error().message();
    EXPECT_EQ(close->close_code(), code);
    EXPECT_TRUE(ws.closed_by_server());
    const std::string end = server.journal().wait_for("end:");
    EXPECT_EQ(end.substr(0, end.find(':', 4) + 1),
              "end:ws" + std::to_string(static_cast<int>(errc)) + ":");
    ws.close();
    EXPECT_TRUE(server.all_closed());
  }

  /// The backend of this run (ctest runs the binary once per backend: BOTH_BACKENDS).
  BackendKind backend() const { return test::backend_under_test(); }
};

// ---- the opening handshake ----

TEST_F(WebSocketTest, AcceptsAValidHandshake) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  const auto& reply = ws.response();
  EXPECT_EQ(reply.status, 101);
  // RFC 6455 §1.3: this key's accept value.
  EXPECT_EQ(reply.header("sec-websocket-accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(reply.header("upgrade"), "websocket");
  EXPECT_EQ(reply.header("connection"), "Upgrade");
  EXPECT_FALSE(reply.has_header("sec-websocket-protocol"));
  EXPECT_FALSE(reply.has_header("sec-websocket-extensions"));
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0x1, "hello")));
  auto echo = ws.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->opcode, 0x1);
  EXPECT_TRUE(echo->fin);
  EXPECT_FALSE(echo->masked);  // a server never masks
  EXPECT_EQ(echo->payload, "hello");
}

TEST_F(WebSocketTest, RefusesBadHandshakes) {
  WsServer server(backend());
  auto ask = [&](const std::string& request) {
    auto reply = test::http_exchange(server.port(), request, 10000);
    EXPECT_TRUE(reply) << request;
    return reply ? *reply : test::HttpReply{};
  };
  const std::string key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  const std::string upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\n";
  const std::string v13 = "Sec-WebSocket-Version: 13\r\n";
  // Not a WebSocket request at all: 426 naming what to ask for.
  auto plain = ask("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(plain.status, 426);
  EXPECT_EQ(plain.header("upgrade"), "websocket");
  // Another version: 426 with the one spoken here.
  auto v8 =
      ask("GET /echo HTTP/1.1\r\nHost: a\r\n" + upgrade + key + "Sec-WebSocket-Version: 8\r\n\r\n");
  EXPECT_EQ(v8.status, 426);
  EXPECT_EQ(v8.header("sec-websocket-version"), "13");
  // Malformed: 400.
  for (const std::string& bad : {
           "GET /echo HTTP/1.1\r\nHost: a\r\n" + upgrade + key + "\r\n",  // no version
           "GET /echo HTTP/1.1\r\nHost: a\r\n" + upgrade + v13 + "\r\n",  // no key
           "GET /echo HTTP/1.1\r\nHost: a\r\n" + upgrade + v13 +
               "Sec-WebSocket-Key: c2hvcnQ=\r\n\r\n",  // a key of 5 bytes
           "GET /echo HTTP/1.1\r\nHost: a\r\n" + upgrade + v13 + key + key + "\r\n",  // two keys
           "GET /echo HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n" + v13 + key +
               "\r\n",                                                          // no Connection
           "GET /echo HTTP/1.0\r\nHost: a\r\n" + upgrade + v13 + key + "\r\n",  // HTTP/1.0
       }) {
    EXPECT_EQ(ask(bad).status, 400) << bad;
  }
  // The route is GET only: other methods get the router's 405.
  EXPECT_EQ(
      ask("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n" + upgrade + v13 + key + "\r\n")
          .status,
      405);
  // Token lists in any case: "keep-alive, Upgrade" and "WebSocket" are fine.
  auto mixed =
      ask("GET /echo HTTP/1.1\r\nHost: a\r\nUpgrade: WebSocket\r\n"
          "Connection: keep-alive, upgrade\r\n" +
          v13 + key + "\r\n");
  EXPECT_EQ(mixed.status, 101);
}

TEST_F(WebSocketTest, NegotiatesTheSubprotocol) {
  Options options;
  options.subprotocols = {"chat.v2", "chat.v1"};
  WsServer server(backend(), options);
  {
    WsRawClient ws = open(server, "/journal", "Sec-WebSocket-Protocol: chat.v1, chat.v2\r\n");
    EXPECT_EQ(ws.response().header("sec-websocket-protocol"), "chat.v2");  // ours first
    EXPECT_EQ(server.journal().wait_for("open:"), "open:chat.v2");
  }
  Journal& j = server.journal();
  (void)j;
  WsRawClient none = open(server, "/echo", "Sec-WebSocket-Protocol: other\r\n");
  EXPECT_FALSE(none.response().has_header("sec-websocket-protocol"));
}

// ---- framing rules: each violation, its close code ----

TEST_F(WebSocketTest, FailsAnUnmaskedClientFrameWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x1, "plain", false), 1002, Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsReservedBitsWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x40 | 0x1, "rsv1"), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0x20 | 0x2, "rsv2"), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0x10 | 0x2, "rsv3"), 1002, Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsReservedOpcodesWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x3, ""), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0xB, "x"), 1002, Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsBadControlFramesWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x9, std::string(126, 'p')), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(0x9, "unfinished ping"), 1002, Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsContinuationsOutOfPlaceWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x0, "orphan"), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(0x1, "a") + ws_frame(kFin | 0x1, "b"), 1002,
                 Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsLengthsNotInShortestFormWith1002) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x2, std::string(10, 'x'), true, 2), 1002,
                 Errc::kProtocolError);
}

TEST_F(WebSocketTest, FailsTextThatIsNotUtf8With1007) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x1, "caf\xC3"), 1007, Errc::kInvalidPayload);
  expect_failure(server, ws_frame(kFin | 0x1, "\xED\xA0\x80"), 1007, Errc::kInvalidPayload);
}

TEST_F(WebSocketTest, FailsFastOnTheFirstBadByteAcrossFragments) {
  // The bad byte is in the first fragment: the server closes before the message could end
  // (the rest is never sent), on a frame it has only the start of.
  WsServer server(backend());
  WsRawClient ws = open(server);
  ASSERT_TRUE(ws.send(ws_frame(0x1, "ok so far")));
  const std::string long_frame =
      ws_frame(0x0, "still ok \xF4\x90 and more" + std::string(5000, 'x'));
  ASSERT_TRUE(ws.send(std::string_view(long_frame).substr(0, 40)));  // cut after the bad bytes
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1007);
  EXPECT_TRUE(ws.closed_by_server());
}

TEST_F(WebSocketTest, AcceptsACharacterSplitAcrossFragments) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  ASSERT_TRUE(ws.send(ws_frame(0x1, "\xCE") + ws_frame(kFin | 0x0, "\xBA")));
  auto echo = ws.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->payload, "\xCE\xBA");
}

TEST_F(WebSocketTest, FailsBadCloseFrames) {
  WsServer server(backend());
  expect_failure(server, ws_frame(kFin | 0x8, "\x03"), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0x8, ws_close_payload(1005)), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0x8, ws_close_payload(999)), 1002, Errc::kProtocolError);
  expect_failure(server, ws_frame(kFin | 0x8, ws_close_payload(1000, "\xC3\x28")), 1007,
                 Errc::kInvalidPayload);
}

TEST_F(WebSocketTest, FailsMessagesAboveTheLimitsWith1009) {
  Options options;
  options.max_message_bytes = 1000;
  options.max_frame_bytes = 600;
  WsServer server(backend(), options);
  // A frame above max_frame_bytes: refused on its header, the payload never sent.
  const std::string big = ws_frame(kFin | 0x2, std::string(601, 'x'));
  expect_failure(server, std::string_view(big).substr(0, 8), 1009, Errc::kMessageTooBig);
  // Fragments adding up past max_message_bytes.
  expect_failure(server,
                 ws_frame(0x2, std::string(600, 'a')) + ws_frame(kFin | 0x0, std::string(401, 'b')),
                 1009, Errc::kMessageTooBig);
  // At the limit: fine.
  WsRawClient ws = open(server);
  ASSERT_TRUE(
      ws.send(ws_frame(0x2, std::string(600, 'a')) + ws_frame(kFin | 0x0, std::string(400, 'b'))));
  auto echo = ws.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->payload.size(), 1000u);
}

// ---- messages ----

TEST_F(WebSocketTest, ReassemblesFragmentsAndAnswersPingsBetweenThem) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  ASSERT_TRUE(ws.send(ws_frame(0x2, "frag") + ws_frame(kFin | 0x9, "are you there") +
                      ws_frame(0x0, "men") + ws_frame(kFin | 0xA, "unasked pong") +
                      ws_frame(kFin | 0x0, "ted")));
  auto pong = ws.read_frame();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->opcode, 0xA);
  EXPECT_EQ(pong->payload, "are you there");
  auto echo = ws.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->opcode, 0x2);
  EXPECT_EQ(echo->payload, "fragmented");
}

TEST_F(WebSocketTest, ReadsMessagesThatTrickleInByteByByte) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  const std::string frames = ws_frame(kFin | 0x1, "slow text") +
                             ws_frame(kFin | 0x2, std::string(300, 'b')) +
                             ws_frame(kFin | 0x9, "p");
  for (char c : frames) {
    ASSERT_TRUE(ws.send(std::string_view(&c, 1)));
    if (c == frames[10]) std::this_thread::sleep_for(1ms);  // some reads of one byte
  }
  auto first = ws.read_frame();
  auto second = ws.read_frame();
  auto pong = ws.read_frame();
  ASSERT_TRUE(first && second && pong);
  EXPECT_EQ(first->payload, "slow text");
  EXPECT_EQ(second->payload, std::string(300, 'b'));
  EXPECT_EQ(pong->opcode, 0xA);
}

TEST_F(WebSocketTest, TakesFramesThatFollowTheHandshakeInTheSameWrite) {
  WsServer server(backend());
  auto fd = test::connect_loopback(server.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(test::send_text(
      fd->get(),
      "GET /echo HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" +
          ws_frame(kFin | 0x1, "eager")));
  std::string pending;
  auto reply = test::read_response(fd->get(), pending, 5000, true);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 101);
  ASSERT_TRUE(test::detail::fill(fd->get(), pending, 7, test::Deadline(5000)));
  EXPECT_EQ(pending, std::string("\x81\x05"
                                 "eager",
                                 7));
}

// ---- the close handshake ----

TEST_F(WebSocketTest, AnswersTheClientsCloseAndEnds) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  auto answer = ws.close_handshake(1000, "done here");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->close_code(), 1000);  // echoed
  EXPECT_TRUE(ws.closed_by_server());     // the server closes the TCP connection first
  EXPECT_EQ(server.journal().wait_for("end:"), "end:ws1:1000:done here");
  ws.close();
  EXPECT_TRUE(server.all_closed());
}

TEST_F(WebSocketTest, AnswersACloseWithoutCodeWithoutCode) {
  WsServer server(backend());
  WsRawClient ws = open(server);
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0x8, "")));
  auto answer = ws.read_close();
  ASSERT_TRUE(answer);
  EXPECT_TRUE(answer->payload.empty());
  EXPECT_EQ(server.journal().wait_for("end:"), "end:ws1:1005:");
}

TEST_F(WebSocketTest, ClosesWhenTheHandlerReturns) {
  WsServer server(backend());
  WsRawClient ws = open(server, "/bye");
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1000);
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0x8, ws_close_payload(1000))));  // our answer
  EXPECT_TRUE(ws.closed_by_server());
  ws.close();
  EXPECT_TRUE(server.all_closed());
}

TEST_F(WebSocketTest, ClosesWith1011WhenTheHandlerThrows) {
  WsServer server(backend());
  WsRawClient ws = open(server, "/throw");
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1011);
}

TEST_F(WebSocketTest, GivesUpOnAPeerThatNeverAnswersTheClose) {
  Options options;
  options.close_timeout_ms = 300;
  WsServer server(backend(), options);
  WsRawClient ws = open(server, "/bye");
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  // No answer, no FIN: the server stops waiting and closes anyway.
  EXPECT_TRUE(ws.closed_by_server(10000));
  EXPECT_TRUE(server.all_closed());
}

TEST_F(WebSocketTest, EndsAsAbnormalWhenThePeerJustLeaves) {
  WsServer server(backend());
  {
    WsRawClient ws = open(server);
    ASSERT_TRUE(ws.send(ws_frame(0x1, "half a message")));
  }  // closed without a close frame, mid-message
  EXPECT_EQ(server.journal().wait_for("end:"), "end:ws1:1006:");
  EXPECT_TRUE(server.all_closed());
}

TEST_F(WebSocketTest, GoesAwayWhenTheServerStops) {
  auto server = std::make_unique<WsServer>(backend());
  WsRawClient ws = open(*server);
  server->stop();
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1001);
}

// ---- keep-alive ----

TEST_F(WebSocketTest, PingsAQuietPeerAndDropsOneThatDoesNotAnswer) {
  Options options;
  options.ping_interval_ms = 100;
  options.ping_timeout_ms = 2000;  // the answer below comes at once, however loaded the host
  WsServer server(backend(), options);
  WsRawClient ws = open(server, "/journal");
  auto ping = ws.read_frame();
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->opcode, 0x9);
  // Answered: the connection stays; the next ping comes after another quiet interval.
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0xA, ping->payload)));
  auto again = ws.read_frame();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->opcode, 0x9);
  // Not answered: dropped.
  EXPECT_TRUE(ws.closed_by_server(20000));
  EXPECT_EQ(server.journal().wait_for("end:"),
            "end:ws" + std::to_string(static_cast<int>(Errc::kPingTimeout)) + ":1006:");
}

// ---- our client ----

class ClientLoop {
 public:
  explicit ClientLoop(BackendKind backend) {
    LoopOptions options;
    options.backend = backend;
    options.ring_entries = 256;
    options.provided_buffers_count = 64;
    auto loop = EventLoop::create(options);
    EXPECT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
  }
  EventLoop& loop() { return *loop_; }
  void run(Task<> body) { test::run_to_end(*loop_, std::move(body), 30s); }

 private:
  std::unique_ptr<EventLoop> loop_;
};

std::string url(WsServer& server, std::string_view path) {
  return "ws://127.0.0.1:" + std::to_string(server.port()) + std::string(path);
}

std::string pattern(size_t size, size_t seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return out;
}

TEST_F(WebSocketTest, EchoesEverySizeWithOurClient) {
  WsServer server(backend());
  ClientLoop client(backend());
  client.run([](EventLoop& loop, std::string where) -> Task<> {
    auto ws = co_await WebSocket::connect(loop, where);
    EXPECT_TRUE(ws) << ws.error().message();
    if (!ws) co_return;
    for (size_t size : {0u, 1u, 125u, 126u, 1024u, 1025u, 4096u, 65535u, 65536u, 300000u}) {
      const std::string payload = pattern(size, size);
      EXPECT_TRUE(co_await (*ws)->send_text(payload));
      auto echo = co_await (*ws)->receive();
      EXPECT_TRUE(echo) << size << ": " << echo.error().message();
      if (!echo) co_return;
      EXPECT_TRUE(echo->is_text());
      EXPECT_EQ(echo->text().size(), size);
      EXPECT_TRUE(echo->text() == payload) << size;
      const auto binary = std::as_bytes(std::span(payload.data(), payload.size()));
      EXPECT_TRUE(co_await (*ws)->send_binary(binary));
      auto echo_binary = co_await (*ws)->receive();
      EXPECT_TRUE(echo_binary && !echo_binary->is_text() && echo_binary->text() == payload);
    }
    EXPECT_TRUE(co_await (*ws)->close(1000, "thanks"));
    EXPECT_EQ((*ws)->close_code(), 1000);
    EXPECT_FALSE((*ws)->is_open());
  }(client.loop(), url(server, "/echo")));
  EXPECT_EQ(server.journal().wait_for("end:"), "end:ws1:1000:thanks");
  EXPECT_TRUE(server.all_closed());
}

TEST_F(WebSocketTest, KeepsFramesWholeWithSeveralSenders) {
  // Two coroutines send big messages at once while a third receives the echoes: the server
  // gets whole frames (or it would fail the connection) and echoes each message intact.
  WsServer server(backend(), {}, {}, 64 * 1024);  // a small queue: senders wait their turn
  ClientLoop client(backend());
  client.run([](EventLoop& loop, std::string where) -> Task<> {
    auto connected = co_await WebSocket::connect(loop, where);
    EXPECT_TRUE(connected);
    if (!connected) co_return;
    WebSocket& ws = **connected;
    auto sender = [](WebSocket& socket, size_t seed) -> Task<> {
      for (size_t i = 0; i < 20; ++i) {
        const std::string payload = pattern(20000 + i * 1000, seed + i);
        EXPECT_TRUE(co_await socket.send_text(payload));
      }
    };
    size_t received = 0;
    auto receiver = [](WebSocket& socket, size_t& count) -> Task<> {
      while (count < 40) {
        auto message = co_await socket.receive();
        EXPECT_TRUE(message);
        if (!message) co_return;
        const size_t size = message->text().size();
        bool known = false;
        for (size_t i = 0; i < 20 && !known; ++i) {
          if (size != 20000 + i * 1000) continue;
          known = message->text() == pattern(size, 100 + i) ||
                  message->text() == pattern(size, 200 + i);
        }
        EXPECT_TRUE(known) << "a message of " << size << " bytes that was never sent";
        ++count;
      }
    };
    co_await when_all(sender(ws, 100), sender(ws, 200), receiver(ws, received));
    EXPECT_EQ(received, 40u);
    co_await ws.close();
  }(client.loop(), url(server, "/echo")));
}

TEST_F(WebSocketTest, ReceiveCanBeCancelledAndGoesOn) {
  WsServer server(backend());
  ClientLoop client(backend());
  client.run([](EventLoop& loop, std::string where) -> Task<> {
    auto ws = co_await WebSocket::connect(loop, where);
    EXPECT_TRUE(ws);
    if (!ws) co_return;
    auto nothing = co_await with_timeout((*ws)->receive(), 50ms);
    EXPECT_FALSE(nothing);
    EXPECT_EQ(nothing.error(), std::errc::timed_out);
    EXPECT_TRUE(co_await (*ws)->send_text("after the timeout"));
    auto echo = co_await with_timeout((*ws)->receive(), 10s);
    EXPECT_TRUE(echo && echo->text() == "after the timeout");
    co_await (*ws)->close();
  }(client.loop(), url(server, "/echo")));
}

TEST_F(WebSocketTest, ClientRefusesABadUrlAndAFailedHandshake) {
  WsServer server(backend());
  ClientLoop client(backend());
  client.run([](EventLoop& loop, uint16_t port) -> Task<> {
    auto http = co_await WebSocket::connect(loop, "http://127.0.0.1:1/");
    EXPECT_EQ(http.error(), make_error_code(Errc::kBadUrl));
    auto junk = co_await WebSocket::connect(loop, "ws://:80/");
    EXPECT_EQ(junk.error(), make_error_code(Errc::kBadUrl));
    // A path without a WebSocket route: 404, no upgrade.
    auto refused = co_await WebSocket::connect(
        loop, "ws://127.0.0.1:" + std::to_string(port) + "/no-such-route");
    EXPECT_EQ(refused.error(), make_error_code(Errc::kHandshakeFailed));
  }(client.loop(), server.port()));
}

/// A listening socket on 127.0.0.1 that answers one WebSocket handshake with `answer` (the
/// lines between the status line and the Sec-WebSocket-Accept it computes), from a thread.
class CannedHandshake {
 public:
  explicit CannedHandshake(std::string extra_lines) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener_.get(), 1);
    socklen_t length = sizeof address;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, extra = std::move(extra_lines)] {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd) return;
      const timeval bound{10, 0};  // every wait below ends, whatever the client does
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
        if (n <= 0) return;
        request.append(buffer, static_cast<size_t>(n));
      }
      const size_t at = request.find("Sec-WebSocket-Key: ") + 19;
      const std::string key = request.substr(at, request.find("\r\n", at) - at);
      const std::string answer =
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Accept: " +
          detail::accept_key(key) + "\r\n" + extra + "\r\n";
      ::send(fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL);
      ::recv(fd.get(), buffer, sizeof buffer, 0);  // until the client closes
    });
  }
  ~CannedHandshake() { thread_.join(); }
  uint16_t port() const { return port_; }

 private:
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// The client builds its Host field from the URL's authority and reads the server's answer:
// an authority that would end the field (and start another) is a bad URL, and an answer with
// an obs-fold fails the handshake, as the server refuses both in requests.
TEST_F(WebSocketTest, ClientRefusesFieldInjectionAndFoldedAnswers) {
  ClientLoop client(backend());
  client.run([](EventLoop& loop) -> Task<> {
    for (const char* url : {"ws://a\r\nX-Injected:1/", "ws://a b:80/", "ws://a\"b:80/"}) {
      auto ws = co_await WebSocket::connect(loop, url);
      EXPECT_EQ(ws.error(), make_error_code(Errc::kBadUrl)) << url;
    }
  }(client.loop()));
  CannedHandshake folded("X-Note:\r\n Sec-WebSocket-Protocol: chat\r\n");
  ClientLoop second(backend());  // a loop runs one body to its end
  second.run([](EventLoop& loop, uint16_t port) -> Task<> {
    auto ws = co_await WebSocket::connect(loop, "ws://127.0.0.1:" + std::to_string(port) + "/");
    EXPECT_EQ(ws.error(), make_error_code(Errc::kHandshakeFailed));
  }(second.loop(), folded.port()));
}

// ---- permessage-deflate ----

TEST_F(WebSocketTest, NegotiatesPermessageDeflate) {
  auto offer = [&](WsServer& server, std::string_view extensions) {
    WsRawClient ws =
        open(server, "/echo", "Sec-WebSocket-Extensions: " + std::string(extensions) + "\r\n");
    return ws.response().header("sec-websocket-extensions");
  };
  // By default the server takes no context over and tells the client not to either, whatever
  // it offered: no connection keeps zlib state between messages.
  Options options;
  options.deflate.enabled = true;
  options.deflate.min_message_bytes = 0;
  {
    WsServer server(backend(), options);
    const std::string alone =
        "permessage-deflate; server_no_context_takeover; "
        "client_no_context_takeover";
    EXPECT_EQ(offer(server, "permessage-deflate"), alone);
    EXPECT_EQ(offer(server, "permessage-deflate; client_max_window_bits"), alone);
    EXPECT_EQ(offer(server, "permessage-deflate; client_max_window_bits=10"),
              alone + "; client_max_window_bits=10");
    EXPECT_EQ(offer(server,
                    "permessage-deflate; server_no_context_takeover; "
                    "server_max_window_bits=12"),
              alone + "; server_max_window_bits=12");
  }
  // With context takeover allowed, the answer follows the offer.
  options.deflate.no_context_takeover = false;
  options.deflate.peer_no_context_takeover = false;
  WsServer server(backend(), options);
  EXPECT_EQ(offer(server, "permessage-deflate"), "permessage-deflate");
  EXPECT_EQ(offer(server, "permessage-deflate; client_max_window_bits"), "permessage-deflate");
  EXPECT_EQ(offer(server, "permessage-deflate; client_max_window_bits=10"),
            "permessage-deflate; client_max_window_bits=10");
  EXPECT_EQ(
      offer(server, "permessage-deflate; server_no_context_takeover; server_max_window_bits=12"),
      "permessage-deflate; server_no_context_takeover; server_max_window_bits=12");
  // Declined offers (unknown or repeated parameters, bad values), then one it takes.
  EXPECT_EQ(offer(server,
                  "permessage-deflate; bogus, permessage-deflate; "
                  "server_max_window_bits=16, permessage-deflate; "
                  "client_no_context_takeover; client_no_context_takeover, "
                  "permessage-deflate; client_no_context_takeover"),
            "permessage-deflate; client_no_context_takeover");
  EXPECT_EQ(offer(server, "x-webkit-deflate-frame"), "");
  EXPECT_EQ(offer(server, "permessage-deflate; server_max_window_bits"), "");  // needs a value
}

// What connections keep for context takeover is bounded per thread: past the budget, a new
// connection is answered with no context takeover both ways; as connections close, the budget
// comes back.
TEST_F(WebSocketTest, KeepsContextTakeoverWithinTheThreadsBudget) {
  Options options;
  options.deflate.enabled = true;
  options.deflate.no_context_takeover = false;
  options.deflate.peer_no_context_takeover = false;
  detail::DeflateParams takeover;
  options.deflate.max_context_bytes =
      2 * detail::context_bytes(takeover, options.deflate.mem_level, true);
  WsServer server(backend(), options);
  const std::string offer =
      "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n";
  const std::string alone =
      "permessage-deflate; server_no_context_takeover; "
      "client_no_context_takeover";
  std::vector<WsRawClient> kept;
  for (int i = 0; i < 2; ++i) {
    kept.push_back(open(server, "/journal", offer));
    EXPECT_EQ(kept.back().response().header("sec-websocket-extensions"), "permessage-deflate");
    EXPECT_EQ(server.journal().wait_for("open:"), "open::deflate");  // its state exists now
  }
  WsRawClient third = open(server, "/echo", offer);
  EXPECT_EQ(third.response().header("sec-websocket-extensions"), alone);
  // Still compressed, and nothing kept: a message each way.
  ASSERT_TRUE(third.send(ws_frame(kFin | 0x1, std::string(5000, 'z'))));
  auto echo = third.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_TRUE(echo->rsv1);
  for (auto& ws : kept) ws.close();
  third.close();
  ASSERT_TRUE(server.all_closed());
  WsRawClient again = open(server, "/echo", offer);
  EXPECT_EQ(again.response().header("sec-websocket-extensions"), "permessage-deflate");
}

TEST_F(WebSocketTest, CompressesBothWaysWithOurClient) {
  Options options;
  options.deflate.enabled = true;
  options.deflate.min_message_bytes = 16;
  WsServer server(backend(), options);
  for (bool no_context_takeover : {false, true}) {
    ClientLoop client(backend());  // a loop runs one body to its end
    Options client_options;
    client_options.deflate.enabled = true;
    client_options.deflate.min_message_bytes = 16;
    client_options.deflate.no_context_takeover = no_context_takeover;
    client_options.deflate.peer_no_context_takeover = no_context_takeover;
    client.run([](EventLoop& loop, std::string where, Options o) -> Task<> {
      auto ws = co_await WebSocket::connect(loop, where, o);
      EXPECT_TRUE(ws) << ws.error().message();
      if (!ws) co_return;
      EXPECT_TRUE((*ws)->compressed());
      const std::string text =
          "repetitive text, repetitive text, repetitive text " + std::string(100000, 'r');
      for (int i = 0; i < 3; ++i) {  // the window carries over (or not) between messages
        EXPECT_TRUE(co_await (*ws)->send_text(text));
        auto echo = co_await (*ws)->receive();
        EXPECT_TRUE(echo && echo->text() == text);
        EXPECT_TRUE(co_await (*ws)->send_text("short"));  // below min_message_bytes: plain
        auto short_echo = co_await (*ws)->receive();
        EXPECT_TRUE(short_echo && short_echo->text() == "short");
      }
      co_await (*ws)->close();
    }(client.loop(), url(server, "/echo"), client_options));
  }
  // Compression happened on the wire: far fewer bytes than the text.
  // (Checked through the raw client: a compressed echo has RSV1 and is small.)
  WsRawClient raw = open(server, "/echo", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
  ASSERT_TRUE(raw.send(ws_frame(kFin | 0x1, std::string(5000, 'z'))));
  auto echo = raw.read_frame();
  ASSERT_TRUE(echo);
  EXPECT_TRUE(echo->rsv1);
  EXPECT_LT(echo->payload.size(), 100u);
}

TEST_F(WebSocketTest, BoundsWhatInflates) {
  Options options;
  options.deflate.enabled = true;
  options.max_message_bytes = 64 * 1024;
  WsServer server(backend(), options);
  // 1 MiB of zeros deflates to about a kilobyte: past the limit only once inflated.
  std::string zeros(1 << 20, '\0');
  std::string compressed;
  {
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    compressed.resize(64 * 1024);
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = static_cast<uInt>(zeros.size());
    z.next_out = reinterpret_cast<Bytef*>(compressed.data());
    z.avail_out = static_cast<uInt>(compressed.size());
    ::deflate(&z, Z_SYNC_FLUSH);
    compressed.resize(compressed.size() - z.avail_out - 4);
    deflateEnd(&z);
  }
  WsRawClient ws = open(server, "/echo", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0x40 | 0x2, compressed)));
  auto close = ws.read_close();
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1009);
  EXPECT_TRUE(ws.closed_by_server());
  // Garbage that does not inflate: 1007.
  WsRawClient bad = open(server, "/echo", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
  ASSERT_TRUE(bad.send(ws_frame(kFin | 0x40 | 0x2, "\xFF\xFF\xFF\xFF garbage")));
  auto bad_close = bad.read_close();
  ASSERT_TRUE(bad_close);
  EXPECT_EQ(bad_close->close_code(), 1007);
  ws.close();
  bad.close();
  EXPECT_TRUE(server.all_closed());
}

// ---- sends from other connections ----

TEST_F(WebSocketTest, BroadcastsFromOtherConnectionsOutliveMembersThatLeave) {
  // Members of a room receive what the others send, written by the sender's coroutine into
  // their connections; members that vanish (a reset) or close in the middle leave nothing
  // behind: a WebSocket lives until the frames other coroutines are writing into it are out.
  WsServer server(backend());
  std::vector<WsRawClient> members;
  for (int i = 0; i < 4; ++i) members.push_back(open(server, "/room"));
  std::this_thread::sleep_for(50ms);   // all four joined (handlers run on the server's loop)
  const std::string big(200000, 'b');  // larger than the socket buffers: a sender suspends
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(members[0].send(ws_frame(kFin | 0x1, round % 2 == 0 ? big : "small")));
    if (round == 5) {
      test::set_reset_on_close(members[3].fd());
      members[3].close();  // vanishes while a broadcast may be writing to it
    }
    if (round == 10) {
      ASSERT_TRUE(members[2].send(ws_frame(kFin | 0x8, ws_close_payload(1000))));
    }
    auto got = members[1].read_frame();
    ASSERT_TRUE(got) << round;
    EXPECT_EQ(got->payload.size(), round % 2 == 0 ? big.size() : 5u);
  }
  for (auto& member : members) member.close();
  EXPECT_TRUE(server.all_closed());
}

// ---- bounded output ----

TEST_F(WebSocketTest, DropsAPeerThatStopsReading) {
  // A client that sends but never reads: the echoes fill the kernel buffers, then the output
  // queue (64 KiB); the write deadline (http.send_timeout_ms) ends the connection.
  http::HttpOptions http;
  http.send_timeout_ms = 300;
  WsServer server(backend(), {}, http, 64 * 1024);
  WsRawClient ws = open(server);
  test::set_receive_buffer(ws.fd(), 4096);
  const std::string message = ws_frame(kFin | 0x2, std::string(60000, 'm'));
  bool failed = false;
  for (int i = 0; i < 400 && !failed; ++i) failed = !ws.send(message, 1000);  // until it stops
  EXPECT_TRUE(server.all_closed(20s));
  // The handler learnt it, in its send() or its receive().
  EXPECT_FALSE(server.journal().wait_for_any({"end:", "send failed"}).empty());
}

}  // namespace
}  // namespace ucp::ws
