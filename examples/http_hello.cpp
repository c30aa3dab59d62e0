// An HTTP/1.1 service in a few lines: routes with parameters, a middleware, a streamed
// response. Build: part of the normal build (bin/example_http_hello). Try:
//   curl http://127.0.0.1:9080/hello/world
//   curl -X POST --data-binary @README.md http://127.0.0.1:9080/count
//   curl http://127.0.0.1:9080/countdown
// Ctrl-C stops it gracefully.

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "ucp/http/HttpServer.h"

using ucp::Task;
using ucp::http::Request;
using ucp::http::Response;

int main() {
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;  // taken by a waiting thread: stop() is not for signal handlers
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ucp::ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = 9080;
  options.thread_num = 2;
  ucp::LoopOptions loop;
  loop.provided_buffers_count = 1024;  // multishot receive into each loop's buffer ring
  ucp::http::HttpServer server(options, loop, ucp::http::HttpOptions{});

  server.router().get("/hello/{name}", [](Request& req, Response& res) -> Task<> {
    res.set_content_type("text/plain");
    res.body_buffer() = "Hello, " + std::string(req.param("name")) + "!\n";
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

  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "%s\n", started.error().message.c_str());
    return 1;
  }
  std::thread signal_waiter([&server, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  std::printf("http_hello on %s\n", server.local_address().to_string().c_str());
  server.run();
  signal_waiter.join();
}
