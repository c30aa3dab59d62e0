// A feed client that stays connected: it subscribes to a line-based feed, logs every line, and
// when the server goes away it reconnects with exponential back-off and jitter (100 ms, 200 ms,
// ... up to 30 s). Lines are read with a BufferedReader, however they fall into reads. It runs
// on the runtime as a LoopService: Ctrl-C stops it, --set and --help work. Try:
//   bin/example_echo_server &          (an echo server on 9000: it sends our line back)
//   bin/example_reconnecting_client --set feed.port=9000
//   then stop and start the echo server: the client waits, retries and carries on.

#include <chrono>
#include <string>

#include "ucp/app/Application.h"
#include "ucp/app/LoopService.h"
#include "ucp/log/Logger.h"
#include "ucp/net/Framing.h"
#include "ucp/net/ReconnectingClient.h"

ucp::Task<> session(ucp::TcpConnection& conn, const std::string& topic) {
  LOG_INFO("connected to {}", conn.peer().to_string());
  const std::string request = "SUBSCRIBE " + topic + "\n";
  if (!co_await conn.write_all(std::span(request))) co_return;
  ucp::BufferedReader reader(conn);
  while (auto line = co_await reader.read_until("\n", 64 * 1024)) {
    LOG_INFO("feed: {}", line->substr(0, line->size() - 1));
  }
  LOG_WARN("disconnected from {}", conn.peer().to_string());
}

int main(int argc, char** argv) {
  ucp::app::Application app("example_reconnecting_client");
  auto& feed = app.schema().section("feed", "the server this client follows");
  feed.text("host", "127.0.0.1", "its name or address").non_empty();
  feed.integer("port", 9000, 1, 65535, "its port");
  feed.text("topic", "prices", "what to subscribe to").non_empty();
  app.schema().set_defaults({"log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  const auto host = app.config().get<std::string>("feed.host");
  const auto port = app.config().get<uint16_t>("feed.port");
  const auto topic = app.config().get<std::string>("feed.topic");
  ucp::app::LoopService service(app.loop_options(), [&](ucp::EventLoop& loop) -> ucp::Task<> {
    ucp::ReconnectingClient client(loop, host, port);
    client.on_retry([](std::error_code error, std::chrono::milliseconds wait) {
      LOG_WARN("connect failed: {}; next attempt in {} ms", error.message(), wait.count());
    });
    (void)co_await client.run([&](ucp::TcpConnection& conn) { return session(conn, topic); });
  });
  return app.serve(service, "reconnecting_client");
}
