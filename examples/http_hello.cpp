// An HTTP/1.1 service in a few lines: routes with parameters, a middleware, a streamed
// response, and a key of its own in the config ([hello] greeting). The runtime
// (ucp/app/Application.h) gives it --set, --help, signals and the exit codes. Try:
//   bin/example_http_hello --set hello.greeting=Bonjour
//   curl http://127.0.0.1:9080/hello/world
//   curl -X POST --data-binary @README.md http://127.0.0.1:9080/count
//   curl http://127.0.0.1:9080/countdown
// Ctrl-C stops it gracefully.

#include <string>

#include "ucp/app/Application.h"
#include "ucp/http/HttpServer.h"

using ucp::Task;
using ucp::http::Request;
using ucp::http::Response;

int main(int argc, char** argv) {
  ucp::app::Application app("example_http_hello");
  app.schema()
      .section("hello", "what GET /hello/{name} says")
      .text("greeting", "Hello", "the word before the name");
  app.schema().set_defaults(
      {"server.ip=127.0.0.1", "server.port=9080", "server.thread_num=2", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  const std::string greeting = app.config().get<std::string>("hello.greeting");

  ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
  server.router().get("/hello/{name}", [&](Request& req, Response& res) -> Task<> {
    res.set_content_type("text/plain");
    res.body_buffer() = greeting + ", " + std::string(req.param("name")) + "!\n";
    co_return;
  });
  server.router().post("/count", [](Request& req, Response& res) -> Task<> {
    res.body_buffer() = std::to_string(req.body().size()) + " bytes\n";
    co_return;
  });
  server.router().get("/countdown", [](Request&, Response& res) -> Task<> {
    for (int i = 3; i > 0; --i) {  // chunked: each write is one chunk, sent as it is written
      if (!co_await res.write(std::to_string(i) + "...\n")) co_return;
    }
    (void)co_await res.write("liftoff\n");
  });
  server.use([](Request&, Response& res, ucp::http::Next next) -> Task<> {
    co_await next();  // the handler (or 404/405) runs here
    res.add_header("X-Served-By", "ucp");
  });
  return app.serve(server);
}
