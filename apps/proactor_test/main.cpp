// bin/proactor_test [CONFIG] [--set section.key=value]...: the echo and http pingpong server.
// Command line, exit codes and signals: apps/common/ServerMain.h.

#include "ucp/net/TcpServer.h"

#include "Protocols.h"
#include "ServerMain.h"

int main(int argc, char** argv) {
  ucp::app::ServerMain app("proactor_test");
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  const ucp::Config& config = app.config();

  size_t max_request_bytes = config.server.max_request_bytes;
  ucp::TcpServer::Handler handler;
  if (config.server.protocol == "http") {
    handler = [max_request_bytes](ucp::TcpConnection& c) {
      return ucp::app::http_pingpong(c, max_request_bytes);
    };
  } else {
    handler = [](ucp::TcpConnection& c) { return ucp::app::echo(c); };
  }
  ucp::TcpServer server(app.server_options(), app.loop_options(), std::move(handler));
  return app.serve(server, config.server.protocol);
}
