#include "Protocols.h"

#include <algorithm>
#include <string_view>

#include "ucp/ws/Accept.h"
#include "ucp/ws/WebSocket.h"

namespace ucp::app {

Task<> echo(TcpConnection& connection) {
  // receive() lends the loop's buffer: an idle connection's frame holds no buffer, and the
  // echo goes out from the very memory the kernel received into.
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;  // error, timeout or peer closed
    if (!co_await connection.write_all(data->bytes())) co_return;
  }
}

http::HttpOptions pingpong_options(const ServerSettings& settings, uint32_t max_request_bytes) {
  const http::HttpOptions& h = settings.http;
  http::HttpOptions options;
  // server.max_request_bytes keeps its meaning for the pingpong: the largest head (431 past
  // it; the request line alone is still bounded by http.max_request_line_bytes, 414) and the
  // largest body (413).
  options.max_request_line_bytes = std::min(h.max_request_line_bytes, max_request_bytes);
  options.max_header_bytes = max_request_bytes;
  options.max_body_bytes = max_request_bytes;
  options.header_timeout_ms = h.header_timeout_ms;
  options.keepalive_timeout_ms = h.keepalive_timeout_ms;
  options.body_timeout_ms = settings.server.read_timeout_ms;
  options.send_timeout_ms = h.send_timeout_ms;
  if (const uint32_t cap = settings.server.read_timeout_ms; cap > 0) {
    auto capped = [cap](uint32_t ms) { return ms == 0 ? cap : std::min(ms, cap); };
    options.header_timeout_ms = capped(options.header_timeout_ms);
    options.keepalive_timeout_ms = capped(options.keepalive_timeout_ms);
  }
  return options;
}

void add_websocket_echo_routes(http::Router& router) {
  router.get("/*", ws::upgrade({}, [](ws::WebSocket& socket) -> Task<> {
               while (auto message = co_await socket.receive()) {
                 if (!co_await socket.send(message->kind, message->data)) break;
               }
             }));
}

void add_pingpong_routes(http::Router& router) {
  auto hello = [](http::Request&, http::Response& response) -> Task<> {
    response.set_content_type("text/plain");
    response.set_body("Hello, World!");
    co_return;
  };
  for (const http::Method method :
       {http::Method::kGet, http::Method::kPost, http::Method::kPut, http::Method::kDelete,
        http::Method::kPatch, http::Method::kOptions, http::Method::kTrace}) {
    router.add(method, "/*", hello);  // HEAD goes through GET; "/*" matches "/" too
  }
}

}  // namespace ucp::app
