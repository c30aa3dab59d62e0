// bin/proactor_test [CONFIG] [--set section.key=value]...: the echo, http pingpong, UDP echo
// and WebSocket echo server. Command line, config, signals, takeover and exit codes are the
// runtime's (ucp/app/Application.h); server.protocol says what it serves.

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"
#include "ucp/net/TcpServer.h"

#include "BinaryKeys.h"
#include "Protocols.h"
#include "UdpEcho.h"

int main(int argc, char** argv) {
  return ucp::app::Application::guarded("proactor_test", [&](ucp::app::Application& app) {
    app.set_default_config_path("config/ucp.conf");
    ucp::app::declare_binary_keys(app.schema());
    app.adjust_loop_options(ucp::app::raise_udp_echo_buffers);
    if (auto exit_code = app.setup(argc, argv)) return *exit_code;
    const std::string protocol = app.config().get<std::string>("server.protocol");

    if (protocol == "udp_echo") {
      std::optional<ucp::MulticastGroup> multicast;
      if (const auto group = app.config().get<std::string>("server.udp_multicast_group");
          !group.empty()) {
        multicast.emplace();
        multicast->group = *ucp::InetAddress::parse(group, 0);  // checked when loaded
        multicast->interface = app.config().get<std::string>("server.udp_multicast_interface");
      }
      ucp::app::UdpEchoServer server(app.server_options(),
                                     app.config().get<uint32_t>("server.udp_recv_buffer_bytes"),
                                     app.loop_options(), std::move(multicast),
                                     app.config().get<uint16_t>("server.udp_metrics_port"));
      return app.serve(server, "udp_echo");
    }
    if (protocol == "http" || protocol == "websocket") {
      const auto max_request = app.config().get<uint32_t>("server.max_request_bytes");
      ucp::http::HttpServer server(app.server_options(), app.loop_options(),
                                   ucp::app::pingpong_options(app.settings(), max_request));
      if (protocol == "http") {
        ucp::app::add_pingpong_routes(server.router());
        return app.serve(server, "http");
      }
      ucp::app::add_websocket_echo_routes(server.router());
      return app.serve(server, "websocket");
    }
    ucp::TcpServer server(app.server_options(), app.loop_options(),
                          [](ucp::TcpConnection& c) { return ucp::app::echo(c); });
    return app.serve(server, "echo");
  });
}
