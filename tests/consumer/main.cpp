// An echo server written against an installed UCP: all a user of the library writes.
// Prints "listening on 127.0.0.1:PORT", then serves until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <thread>

#include "ucp/net/TcpServer.h"
#include "ucp/version.h"

ucp::Task<> echo(ucp::TcpConnection& conn) {
  for (;;) {
    auto data = co_await conn.receive();  // bytes in a buffer the loop lends
    if (!data || data->empty()) co_return;
    if (!co_await conn.write_all(data->bytes())) co_return;
  }
}

int main() {
  sigset_t stop_signals;  // taken by a waiting thread: stop() may not run in a signal handler
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ucp::ServerOptions options;
  options.ip = "127.0.0.1";
  options.port = 0;  // any free port
  ucp::TcpServer server(options, ucp::LoopOptions{}, echo);
  if (auto started = server.start(); !started)
    return std::fprintf(stderr, "%s\n", started.error().message.c_str()), 1;
  std::printf("UCP %s: listening on %s\n", UCP_VERSION_STRING,
              server.local_address().to_string().c_str());
  std::fflush(stdout);
  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  server.run();
  stopper.join();
}
