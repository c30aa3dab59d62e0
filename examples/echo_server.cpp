// The smallest UCP server: an echo service on 127.0.0.1:9000 with two worker loops.
// Build: part of the normal build (bin/example_echo_server). Try: bin/test_client normal --port
// 9000
//
//   bin/example_echo_server               multishot receive into each loop's provided ring
//   bin/example_echo_server --registered  one READ_FIXED per read into registered buffers,
//                                         echoed back with WRITE_FIXED
//   bin/example_echo_server --version     the UCP version it was built with

#include <csignal>
#include <cstdio>
#include <string_view>
#include <thread>

#include "ucp/net/TcpServer.h"
#include "ucp/version.h"

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
  if (argc > 1 && std::string_view(argv[1]) == "--version") {
    std::printf("example_echo_server (UCP) %s\n", UCP_VERSION_STRING);
    return 0;
  }
  bool registered = argc > 1 && std::string_view(argv[1]) == "--registered";
  std::signal(SIGPIPE, SIG_IGN);
  // Ctrl-C stops the server gracefully: the signal is taken by a waiting thread (stop() may
  // be called from any thread, but not from a signal handler).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ucp::ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = 9000;
  options.thread_num = 2;
  options.read_timeout_ms = 30000;
  ucp::LoopOptions loop_options;
  if (registered) {
    loop_options.registered_buffers_count = 256;  // x 4096 B per worker ring
  } else {
    loop_options.provided_buffers_count = 1024;  // x 4096 B, shared by a loop's connections
  }
  ucp::TcpServer server(options, loop_options, echo);
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "%s\n", started.error().message.c_str());
    return 1;
  }
  std::thread signal_waiter([&server, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  std::printf("echo server on %s\n", server.local_address().to_string().c_str());
  server.run();
  signal_waiter.join();
}
