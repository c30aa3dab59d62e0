// The smallest UCP server: an echo service on 127.0.0.1:9000 with two worker loops.
// Build: part of the normal build (bin/example_echo_server). Try: nc 127.0.0.1 9000

#include <csignal>
#include <cstdio>
#include <thread>

#include "ucp/net/TcpServer.h"

namespace {

// One coroutine per connection, on the worker loop that owns it.
ucp::Task<> echo(ucp::TcpConnection& conn) {
  char buf[4096];
  for (;;) {
    auto n = co_await conn.read(buf);  // read_timeout_ms applies
    if (!n || *n == 0) co_return;      // error, timeout or peer closed
    if (!co_await conn.write_all({buf, *n})) co_return;
  }
}

}  // namespace

int main() {
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
  ucp::TcpServer server(options, ucp::LoopOptions{}, echo);
  if (auto error = server.start(); !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
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
