// bin/http_server [CONFIG] [--set section.key=value]...: static files under http.root,
// POST /echo, GET /healthz, GET /metrics and the WebSocket echo GET /ws/echo, on
// ucp::http::HttpServer. Command line, config, signals, takeover and exit codes are the
// runtime's (ucp/app/Application.h).

#include <string>

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"
#include "ucp/http/StaticFiles.h"
#include "ucp/ws/Accept.h"
#include "ucp/ws/WebSocket.h"

#include "BinaryKeys.h"
#include "Metrics.h"

int main(int argc, char** argv) {
  using ucp::http::Request;
  using ucp::http::Response;
  return ucp::app::Application::guarded("http_server", [&](ucp::app::Application& app) {
    app.set_default_config_path("config/ucp.conf");
    ucp::app::declare_binary_keys(app.schema());
    if (auto exit_code = app.setup(argc, argv)) return *exit_code;

    const auto root = app.config().get<std::string>("http.root");
    auto files =
        ucp::http::StaticFiles::open(root, {.index = app.config().get<std::string>("http.index")});
    if (!files) {
      return app.usage_error("http.root '" + root + "': " + files.error().code.message() +
                             " (create the directory, or set http.root)");
    }

    ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
    auto& router = server.router();
    router.get("/healthz", [](Request&, Response& response) -> ucp::Task<> {
      response.set_content_type("text/plain");
      response.set_body("ok");
      co_return;
    });
    router.get("/metrics", [&server](Request&, Response& response) -> ucp::Task<> {
      response.set_content_type(ucp::app::kPrometheusContentType);
      ucp::app::render_metrics(server, response.body_buffer());
      co_return;
    });
    router.post("/echo", [](Request& request, Response& response) -> ucp::Task<> {
      if (request.has_header("content-type"))
        response.set_content_type(request.header("content-type"));
      response.set_body(request.body());  // the request's bytes live until the answer is sent
      co_return;
    });
    // Every message comes back as it was sent (text or binary) until the peer closes;
    // permessage-deflate when the client offers it.
    ucp::ws::Options ws_options;
    ws_options.deflate.enabled = true;
    router.get("/ws/echo", ucp::ws::upgrade(ws_options, [](ucp::ws::WebSocket& ws) -> ucp::Task<> {
                 while (auto message = co_await ws.receive()) {
                   if (!co_await ws.send(message->kind, message->data)) break;
                 }
               }));
    files->mount(router, "/");
    // One line per request at DEBUG (log.level = DEBUG to see them).
    server.use(ucp::http::access_log(ucp::LogLevel::kDebug));
    return app.serve(server, "http");
  });
}
