// bin/proactor_test [CONFIG] [--set section.key=value]...: the echo, http pingpong, UDP echo
// and WebSocket echo server.
// Command line, exit codes and signals: apps/common/ServerMain.h.

#include "ucp/http/HttpServer.h"
#include "ucp/net/TcpServer.h"

#include "Protocols.h"
#include "ServerMain.h"
#include "UdpEcho.h"

int main(int argc, char** argv) {
  ucp::app::ServerMain app("proactor_test");
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  const ucp::Config& config = app.config();

  if (config.server.protocol == "udp_echo") {
    ucp::app::UdpEchoServer server(config.server, app.loop_options());
    return app.serve(server, "udp_echo");
  }
  if (config.server.protocol == "http") {
    ucp::http::HttpServer server(app.server_options(), app.loop_options(),
                                 ucp::app::pingpong_options(config));
    ucp::app::add_pingpong_routes(server.router());
    return app.serve(server, "http");
  }
  if (config.server.protocol == "websocket") {
    ucp::http::HttpServer server(app.server_options(), app.loop_options(),
                                 ucp::app::pingpong_options(config));
    ucp::app::add_websocket_echo_routes(server.router());
    return app.serve(server.tcp(), "websocket");
  }
  ucp::TcpServer server(app.server_options(), app.loop_options(),
                        [](ucp::TcpConnection& c) { return ucp::app::echo(c); });
  return app.serve(server, "echo");
}
