// An echo server written against an installed UCP: all a user of the library writes. The
// runtime (ucp/app/Application.h) prints "listening on 127.0.0.1:PORT" and stops gracefully
// on SIGTERM or SIGINT.
#include "ucp/app/Application.h"
#include "ucp/net/TcpServer.h"

ucp::Task<> echo(ucp::TcpConnection& conn) {
  for (;;) {
    auto data = co_await conn.receive();  // bytes in a buffer the loop lends
    if (!data || data->empty()) co_return;
    if (!co_await conn.write_all(data->bytes())) co_return;
  }
}

int main(int argc, char** argv) {
  ucp::app::Application app("consumer_echo");
  app.schema().set_defaults({"server.ip=127.0.0.1", "server.port=0", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  ucp::TcpServer server(app.server_options(), app.loop_options(), echo);
  return app.serve(server, "echo");
}
