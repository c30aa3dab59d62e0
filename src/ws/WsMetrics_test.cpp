// ws::Metrics over real loopback connections: connections accepted and open, messages and
// bytes each way, counted by the server's WebSockets and rendered by the server's registry.

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ucp/http/HttpMetrics.h"
#include "ucp/http/HttpServer.h"
#include "ucp/metrics/Registry.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/Metrics.h"

#include "HttpTestServer.h"
#include "WsRawClient.h"

namespace ucp::ws {
namespace {

using namespace std::chrono_literals;

TEST(WsMetrics, CountsConnectionsMessagesAndBytes) {
  Metrics counted(2);
  Options options;
  options.metrics = &counted;
  test::HttpTestServer s([&](http::HttpServer& server) {
    ASSERT_TRUE(counted.add_to(server.enable_metrics({.process = false})));
    server.serve_metrics();
    server.router().get("/echo", upgrade(options, [](WebSocket& ws) -> Task<> {
                          while (auto message = co_await ws.receive()) {
                            if (!co_await ws.send(message->kind, message->data)) break;
                          }
                        }));
  });
  {
    auto ws = test::WsRawClient::open(s.port(), "/echo");
    ASSERT_TRUE(ws) << ws.error().message();
    for (const char* text : {"one", "two", "three"}) {
      ASSERT_TRUE(ws->send(test::ws_frame(0x81, text)));
      auto echo = ws->read_frame();
      ASSERT_TRUE(echo);
      EXPECT_EQ(echo->payload, text);
    }
    EXPECT_EQ(counted.connections(), 1u);
    EXPECT_EQ(counted.open(), 1.0);
    EXPECT_EQ(counted.messages_received(), 3u);
    EXPECT_EQ(counted.messages_sent(), 3u);
    ASSERT_TRUE(ws->send(test::ws_frame(0x88, test::ws_close_payload(1000))));
    auto close = ws->read_frame();
    ASSERT_TRUE(close);
    EXPECT_EQ(close->close_code(), 1000);
  }
  // The server's side ends after the close handshake: bounded wait for the gauge.
  for (int i = 0; i < 500 && counted.open() != 0.0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(counted.open(), 0.0);
  const std::string text =
      test::ask_once(s.port(), "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").body;
  EXPECT_NE(text.find("\nucp_websocket_connections_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nucp_websocket_connections_open 0\n"), std::string::npos);
  EXPECT_NE(text.find("\nucp_websocket_messages_received_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("\nucp_websocket_messages_sent_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("\nucp_websocket_bytes_received_total 11\n"), std::string::npos);
  EXPECT_NE(text.find("\nucp_websocket_bytes_sent_total 11\n"), std::string::npos);
  // The 101 is in the server's own counters as an informational answer.
  EXPECT_NE(text.find("ucp_http_requests_total{worker=\"0\",class=\"1xx\"} 1\n"),
            std::string::npos);
}

TEST(WsMetrics, RefusesToRegisterTwice) {
  Metrics counted(1);
  metrics::Registry registry;
  ASSERT_TRUE(counted.add_to(registry));
  EXPECT_FALSE(counted.add_to(registry));
}

}  // namespace
}  // namespace ucp::ws
