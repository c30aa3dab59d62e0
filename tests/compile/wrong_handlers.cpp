// Handlers of the wrong shape are refused at the line that passes them, naming the concept
// they miss (TcpServer: ConnectionHandler, routes: RequestHandler, use(): MiddlewareHandler,
// WebSocket routes: WebSocketHandler), not deep inside the library's type erasure.
// tests/compile/ExpectDiagnostic.cmake compiles this file both ways.

#include "ucp/http/HttpServer.h"
#include "ucp/net/TcpServer.h"
#include "ucp/ws/Accept.h"

using ucp::Task;
using ucp::http::Request;
using ucp::http::Response;

int main() {
  ucp::http::HttpServer http({}, {}, {});
#ifdef UCP_CORRECT
  ucp::TcpServer tcp({}, {}, [](ucp::TcpConnection&) -> Task<> { co_return; });
  http.router().get("/", [](Request&, Response&) -> Task<> { co_return; });
  http.use([](Request&, Response&, ucp::http::Next next) -> Task<> { co_await next(); });
  http.router().get("/ws", ucp::ws::upgrade({}, [](ucp::ws::WebSocket&) -> Task<> { co_return; }));
#else
  // Not a coroutine: nothing would wait for the connection's I/O.
  ucp::TcpServer tcp({}, {}, [](ucp::TcpConnection& conn) { (void)conn; });  // MISTAKE
  // The response is missing.
  http.router().get("/", [](Request&) -> Task<> { co_return; });  // MISTAKE
  // A middleware that cannot go on (no Next).
  http.use([](Request&, Response&) -> Task<> { co_return; });  // MISTAKE
  // A WebSocket taken by value: it is the connection's, not a copy.
  http.router().get(
      "/ws", ucp::ws::upgrade({}, [](ucp::ws::WebSocket) -> Task<> { co_return; }));  // MISTAKE
#endif
}
