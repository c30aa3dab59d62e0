// The smallest UCP server: an echo service, by default on 127.0.0.1:9000 with two worker loops.
// The runtime (ucp/app/Application.h) gives it a config file, --set, --help, signals (Ctrl-C
// stops it gracefully), the "listening on" line and the exit codes. Try:
//
//   bin/example_echo_server                      then: bin/test_client normal --port 9000
//   bin/example_echo_server --set server.port=0  any free port (the log line names it)
//   bin/example_echo_server --set event_loop.multishot_recv=false
//     --set event_loop.registered_buffers_count=256   READ_FIXED into registered buffers
//   bin/example_echo_server --help               every key, its type and default

#include "ucp/app/Application.h"
#include "ucp/net/TcpServer.h"

namespace {

// One coroutine per connection, on the worker loop that owns it. receive() lends the
// loop's buffer (no copy, and an idle connection holds none); the lease returns it.
ucp::Task<> echo(ucp::TcpConnection& conn) {
  for (;;) {
    auto data = co_await conn.receive();    // read_timeout_ms applies
    if (!data || data->empty()) co_return;  // error, timeout or peer closed
    if (!co_await conn.write_all(data->bytes())) co_return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ucp::app::Application app("example_echo_server");
  // This program's defaults; a config file or --set still wins.
  app.schema().set_defaults({"server.ip=127.0.0.1", "server.port=9000", "server.thread_num=2",
                             "server.read_timeout_ms=30s", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  ucp::TcpServer server(app.server_options(), app.loop_options(), echo);
  return app.serve(server, "echo");
}
