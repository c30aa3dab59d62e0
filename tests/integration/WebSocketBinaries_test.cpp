// The WebSocket echo of the two binaries, end to end over loopback: bin/http_server's
// GET /ws/echo and bin/proactor_test with server.protocol = websocket. A raw client sends
// exactly the frames a test is about: text and binary echoes (one frame, fragmented, several
// in one write), a ping answered with its pong, a violation failed with its close code, and
// the close handshake; a request that is not an upgrade gets 426.

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "HttpClient.h"
#include "ServerProcess.h"
#include "WsRawClient.h"

namespace ucp::test {
namespace {

constexpr uint8_t kFin = 0x80;

/// An empty document root for bin/http_server, removed at the end.
class EmptyRoot {
 public:
  EmptyRoot() {
    char name[] = "/tmp/ucp-ws-www-XXXXXX";
    dir_ = ::mkdtemp(name) != nullptr ? name : "/nonexistent";
  }
  ~EmptyRoot() { ::rmdir(dir_.c_str()); }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

ServerProcess::Options http_server(const EmptyRoot& root) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = {"http.root=" + root.path(), "server.thread_num=1"};
  return options;
}

ServerProcess::Options proactor_websocket() {
  ServerProcess::Options options;
  options.overrides = {"server.protocol=websocket", "server.thread_num=2"};
  return options;
}

/// The echo a WebSocket server must give on `path`, through everything a client may send.
void expect_echo_server(ServerProcess& server, const std::string& path) {
  auto opened = WsRawClient::open(server.port(), path);
  ASSERT_TRUE(opened) << opened.error().message();
  WsRawClient ws = std::move(*opened);
  // Text and binary, one frame each, both in one write.
  const std::string binary("\x00\x01\xFF\xFE", 4);
  ASSERT_TRUE(ws.send(ws_frame(kFin | 0x1, "h\xC3\xA9llo") + ws_frame(kFin | 0x2, binary)));
  auto text = ws.read_frame();
  ASSERT_TRUE(text);
  EXPECT_EQ(text->opcode, 0x1);
  EXPECT_FALSE(text->masked);
  EXPECT_EQ(text->payload, "h\xC3\xA9llo");
  auto bin = ws.read_frame();
  ASSERT_TRUE(bin);
  EXPECT_EQ(bin->opcode, 0x2);
  EXPECT_EQ(bin->payload, binary);
  // Fragmented, with a ping between the fragments: the pong comes first, then the message.
  ASSERT_TRUE(ws.send(ws_frame(0x1, "frag") + ws_frame(kFin | 0x9, "are you there") +
                      ws_frame(kFin | 0x0, "mented")));
  auto pong = ws.read_frame();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->opcode, 0xA);
  EXPECT_EQ(pong->payload, "are you there");
  auto whole = ws.read_frame();
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->payload, "fragmented");
  // A large message (16-bit and 64-bit lengths).
  for (size_t size : {300u, 70000u}) {
    const std::string big(size, 'b');
    ASSERT_TRUE(ws.send(ws_frame(kFin | 0x2, big)));
    auto echo = ws.read_frame();
    ASSERT_TRUE(echo);
    EXPECT_EQ(echo->payload.size(), size);
  }
  auto close = ws.close_handshake(1000, "bye");
  ASSERT_TRUE(close);
  EXPECT_EQ(close->close_code(), 1000);
  EXPECT_TRUE(ws.closed_by_server());

  // A violation: an unmasked frame from a client fails the connection with 1002.
  auto rude = WsRawClient::open(server.port(), path);
  ASSERT_TRUE(rude);
  ASSERT_TRUE(rude->send(ws_frame(kFin | 0x1, "naked", false)));
  auto failed = rude->read_close();
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->close_code(), 1002);
  EXPECT_TRUE(rude->closed_by_server());
}

TEST(WebSocketBinaries, HttpServerEchoesOnWsEcho) {
  EmptyRoot root;
  ServerProcess server(http_server(root));
  ASSERT_TRUE(server.start()) << server.error();
  expect_echo_server(server, "/ws/echo");
  // Not an upgrade: 426 with the protocol to ask for.
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET /ws/echo HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string pending;
  auto reply = read_response(fd->get(), pending, 10000, false);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 426);
  EXPECT_EQ(reply->header("upgrade"), "websocket");
  EXPECT_TRUE(server.stop().clean());
}

TEST(WebSocketBinaries, ProactorTestIsAWebSocketEchoServer) {
  ServerProcess server(proactor_websocket());
  ASSERT_TRUE(server.start()) << server.error();
  expect_echo_server(server, "/");
  expect_echo_server(server, "/any/path");
  EXPECT_TRUE(server.stop().clean());
}

}  // namespace
}  // namespace ucp::test
