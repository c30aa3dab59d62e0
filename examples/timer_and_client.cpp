// Timers on one loop: a PeriodicTimer paces a client that sends a line every 200 ms (the ticks
// stay on a fixed grid however long each round takes), each answer awaited with a deadline
// (with_timeout), and a sleep before closing.
// Usage: bin/example_timer_and_client PORT   (e.g. against bin/example_echo_server: 9000)
//        bin/example_timer_and_client --version

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ucp/io/Operations.h"
#include "ucp/io/PeriodicTimer.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/TcpClient.h"
#include "ucp/version.h"

namespace {

using namespace std::chrono_literals;

ucp::Task<> rounds(ucp::EventLoop& loop, uint16_t port) {
  auto conn = co_await ucp::TcpClient::connect(loop, "127.0.0.1", port);
  if (!conn) {
    std::printf("connect: %s\n", conn.error().message().c_str());
    co_return;
  }
  ucp::PeriodicTimer every(loop, 200ms);
  for (int round = 1; round <= 3; ++round) {
    auto ticks = co_await every.tick();  // > 1 if a round overran its period
    if (!ticks) co_return;
    std::string line = "round " + std::to_string(round) + "\n";
    if (!co_await conn->write(std::span(line))) co_return;  // copied and queued
    char reply[256];
    auto n = co_await ucp::with_timeout(conn->read(reply), 1s);
    if (!n || *n == 0) {
      std::printf("read: %s\n", n ? "closed" : n.error().message().c_str());  // timed out?
      co_return;
    }
    std::printf("tick x%llu: got %.*s", static_cast<unsigned long long>(*ticks),
                static_cast<int>(*n), reply);
  }
  co_await ucp::io::sleep_for(loop, 100ms);  // the loop's timer heap: no kernel timer object
  co_await conn->close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--version") {
    std::printf("example_timer_and_client (UCP) %s\n", UCP_VERSION_STRING);
    return 0;
  }
  auto port = static_cast<uint16_t>(argc > 1 ? std::atoi(argv[1]) : 9000);
  ucp::LoopOptions options;
  auto loop = ucp::EventLoop::create(options);
  if (!loop) {
    std::fprintf(stderr, "%s\n",
                 ucp::EventLoop::describe_setup_error(loop.error(), options).c_str());
    return 1;
  }
  loop->spawn([](ucp::EventLoop& l, uint16_t p) -> ucp::Task<> {
    co_await rounds(l, p);
    l.stop();
  }(**loop, port));
  loop->run();
}
