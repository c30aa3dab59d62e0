// bin/ucp_gateway [CONFIG] [--set section.key=value]...: an HTTP reverse proxy or a TCP load
// balancer in front of upstream groups (docs/gateway.md). Command line, config, signals, exit
// codes and logging are the runtime's (ucp/app/Application.h), as for the other binaries;
// SIGHUP reloads the upstream and route sections without dropping a connection.

#include "ucp/app/Application.h"
#include "ucp/log/Logger.h"

#include "GatewayConfig.h"
#include "GatewayService.h"

int main(int argc, char** argv) {
  return ucp::app::Application::guarded("ucp_gateway", [&](ucp::app::Application& app) {
    app.set_default_config_path("config/gateway.conf");
    ucp::gateway::declare_gateway_sections(app.schema());
    // A relay and a proxied body move one receive buffer per send: 16 KiB halves the CPU per
    // byte against 4 KiB (docs/gateway.md). The relay's and the reader's own timeouts govern
    // reads, so the generic read timeout is off.
    app.schema().set_defaults(
        {"server.port=8080", "server.read_timeout_ms=0", "event_loop.provided_buffer_size=16384"});
    if (auto exit_code = app.setup(argc, argv)) return *exit_code;

    const ucp::gateway::GatewaySettings settings = ucp::gateway::gateway_settings(app.config());
    ucp::gateway::GatewayService service(settings, app.server_options(), app.loop_options(),
                                         app.http_options());
    app.on_reload([&service](const ucp::app::Config& fresh) -> ucp::Result<void, ucp::Error> {
      const ucp::gateway::GatewaySettings next = ucp::gateway::gateway_settings(fresh);
      if (auto done = service.reconfigure(next); !done) return done;
      LOG_INFO("reloaded: {} upstream group(s), {} route(s)", next.groups.size(),
               next.routes.size());
      return {};
    });
    return app.serve(service,
                     settings.mode == ucp::gateway::Mode::kTcp ? "tcp gateway" : "http gateway");
  });
}
