// Interoperability client: Boost.Beast's WebSocket stream (synchronous, as in Beast's own
// examples) against a UCP WebSocket echo server.
//
//   beast_ws_client HOST PORT PATH [deflate]
//
// Text (multi-byte UTF-8) and binary messages across the three length forms, a message sent
// in fragments, a ping whose pong must come back with its payload, then a close with 1000;
// Beast checks the server's frames against RFC 6455 as it reads them (masking, lengths,
// control frames, close codes, UTF-8). With `deflate`, permessage-deflate is offered and must
// be agreed. Prints PASS or one FAIL line per mismatch; exit 0 when everything matched.

#include <cstdio>
#include <string>
#include <utility>  // before Asio: Boost 1.74's headers use std::exchange unincluded
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  ++failures;
}

std::string pattern(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 31 + 7) & 0xFF);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: beast_ws_client HOST PORT PATH [deflate]\n");
    return 2;
  }
  const std::string host = argv[1];
  const std::string port = argv[2];
  const std::string path = argv[3];
  const bool deflate = argc > 4 && std::string(argv[4]) == "deflate";
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    websocket::stream<tcp::socket> ws(io);
    boost::asio::connect(ws.next_layer(), resolver.resolve(host, port));
    if (deflate) {
      websocket::permessage_deflate pmd;
      pmd.client_enable = true;
      ws.set_option(pmd);
    }
    websocket::response_type answer;
    ws.handshake(answer, host + ":" + port, path);
    if (deflate && answer[beast::http::field::sec_websocket_extensions].find(
                       "permessage-deflate") == beast::string_view::npos) {
      fail("permessage-deflate not agreed");
    }

    struct Case {
      std::string data;
      bool binary;
    };
    const std::vector<Case> cases = {
        {"hello", false},
        {"h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\x98\x80", false},
        {std::string(125, 'x'), false},
        {std::string(126, 'y'), false},
        {std::string(70000, 'z'), false},
        {"", true},
        {pattern(1), true},
        {pattern(65535), true},
        {pattern(65536), true},
        {pattern(300000), true},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      ws.binary(cases[i].binary);
      ws.write(boost::asio::buffer(cases[i].data));
      beast::flat_buffer echo;
      ws.read(echo);
      if (ws.got_binary() != cases[i].binary) fail("case " + std::to_string(i) + ": kind changed");
      if (beast::buffers_to_string(echo.data()) != cases[i].data) {
        fail("case " + std::to_string(i) + ": echo differs");
      }
    }
    // One message in three frames.
    ws.text(true);
    ws.write_some(false, boost::asio::buffer(std::string("frag")));
    ws.write_some(false, boost::asio::buffer(std::string("men")));
    ws.write_some(true, boost::asio::buffer(std::string("ted")));
    beast::flat_buffer whole;
    ws.read(whole);
    if (beast::buffers_to_string(whole.data()) != "fragmented") fail("fragmented echo differs");
    // A ping: its pong arrives while reading (the control callback sees it), before the echo
    // of the message sent behind it.
    bool ponged = false;
    ws.control_callback([&](websocket::frame_type kind, beast::string_view payload) {
      if (kind == websocket::frame_type::pong && payload == "ping-payload") ponged = true;
    });
    ws.ping("ping-payload");
    ws.write(boost::asio::buffer(std::string("after the ping")));
    beast::flat_buffer after;
    ws.read(after);
    if (!ponged) fail("no pong with the ping's payload");
    if (beast::buffers_to_string(after.data()) != "after the ping") fail("echo after ping");
    ws.close(websocket::close_code::normal);
    // Beast's close() reads until the server's close frame; the code is in reason().
    if (ws.reason().code != websocket::close_code::normal) {
      fail("close code " + std::to_string(ws.reason().code) + ", expected 1000");
    }
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  if (failures == 0) std::printf("PASS boost.beast %d\n", BOOST_BEAST_VERSION);
  return failures == 0 ? 0 : 1;
}
