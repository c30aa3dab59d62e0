#pragma once
// Accepting WebSocket connections on the HTTP layer (RFC 6455 §4.2): a route handler checks the
// opening handshake and answers it; once the 101 is out the connection is the WebSocket's.
//
//   // Every valid handshake on the route becomes a WebSocket running the handler:
//   router.get("/ws/echo", ucp::ws::upgrade(options, [](ucp::ws::WebSocket& ws) -> ucp::Task<> {
//     while (auto message = co_await ws.receive()) co_await ws.send(message->kind, message->data);
//   }));
//
//   // Or decide in a handler of your own (authentication, choosing a room), with middleware
//   // around it as for any route:
//   router.get("/rooms/{name}", [&](Request& req, Response& res) -> ucp::Task<> {
//     if (!allowed(req)) { res.set_status(403); co_return; }
//     Room* room = rooms.find(req.param("name"));
//     ucp::ws::accept(req, res, options, [room](ucp::ws::WebSocket& ws) { return room->join(ws);
//     }); co_return;
//   });
//
// What accept() answers:
// - 101 Switching Protocols to a valid handshake: GET, HTTP/1.1, "Upgrade: websocket",
//   "Connection: Upgrade", one Sec-WebSocket-Key (16 bytes in base64), Sec-WebSocket-Version 13.
//   It carries Sec-WebSocket-Accept, the subprotocol chosen (the first of options.subprotocols
//   the client offered, if any) and permessage-deflate when options.deflate.enabled and the
//   client offered parameters it can accept (RFC 7692 §5: offers it cannot are declined; none
//   accepted means no compression).
// - 426 Upgrade Required (with "Upgrade: websocket") to a request that does not ask for a
//   WebSocket at all, and to one of another version (with "Sec-WebSocket-Version: 13").
// - 400 Bad Request to any other malformed handshake.
// The handler runs on the connection's loop once the 101 has been sent; the connection is
// closed when it returns (with a close handshake, 1000; 1011 if it threw).
//
// Thread contract: called from route handlers, on the connection's loop.

#include <concepts>
#include <type_traits>
#include <utility>

#include "ucp/http/Request.h"
#include "ucp/http/Response.h"
#include "ucp/http/Router.h"
#include "ucp/ws/Protocol.h"
#include "ucp/ws/WebSocket.h"

namespace ucp::ws {

/// What runs a server connection: `ucp::Task<> f(ucp::ws::WebSocket&)`, or a lambda of that
/// shape. One of another shape is refused at the line that passes it.
template <class F>
concept WebSocketHandler =
    std::invocable<F&, WebSocket&> && std::same_as<std::invoke_result_t<F&, WebSocket&>, Task<>>;

/// Answers `request` as an opening handshake (above). True: 101, and `handler` takes the
/// connection once it is sent. False: refused (400/426 set on `response`). `options` must
/// outlive the connection (keep them with the route or the server).
bool accept(const http::Request& request, http::Response& response, const Options& options,
            WebSocket::Handler handler);

/// A route handler that accepts every valid handshake with `handler`, the options kept in the
/// route. `handler` is called once per connection, from every worker thread.
http::Handler upgrade(Options options, WebSocket::Handler handler);

template <WebSocketHandler F>
bool accept(const http::Request& request, http::Response& response, const Options& options,
            F&& handler) {
  return accept(request, response, options, WebSocket::Handler(std::forward<F>(handler)));
}
template <WebSocketHandler F>
http::Handler upgrade(Options options, F&& handler) {
  return upgrade(std::move(options), WebSocket::Handler(std::forward<F>(handler)));
}

/// The request asks for a WebSocket ("Upgrade: websocket"), whether valid or not: for a path
/// that serves both a page and a WebSocket.
bool is_upgrade_request(const http::Request& request) noexcept;

}  // namespace ucp::ws
