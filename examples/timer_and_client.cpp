// A single EventLoop used directly: a coroutine connects to a server, sends a line, waits
// for the answer with a read timeout, and sleeps between rounds with IORING_OP_TIMEOUT.
// Usage: bin/example_timer_and_client PORT   (e.g. against bin/example_echo_server: 9000)
//        bin/example_timer_and_client --version

#include <cstdio>
#include <cstdlib>
#include <string>

#include <arpa/inet.h>
#include <sys/socket.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/version.h"

namespace {

ucp::Task<> talk(ucp::EventLoop& loop, uint16_t port) {
  ucp::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto connected = co_await ucp::io::connect(loop, fd.get(), reinterpret_cast<sockaddr*>(&address),
                                             sizeof address);
  if (!connected) {
    std::printf("connect: %s\n", connected.error().message().c_str());
    co_return;
  }
  for (int round = 1; round <= 3; ++round) {
    std::string line = "round " + std::to_string(round) + "\n";
    if (!co_await ucp::io::send(loop, fd.get(), std::as_bytes(std::span(line)))) co_return;
    char reply[256];
    auto n = co_await ucp::io::recv(loop, fd.get(), std::as_writable_bytes(std::span(reply)),
                                    /*timeout_ms=*/1000);
    if (!n) {
      std::printf("recv: %s\n", n.error().message().c_str());  // e.g. "Connection timed out"
      co_return;
    }
    std::printf("got %.*s", static_cast<int>(*n), reply);
    co_await ucp::io::sleep_for(loop, std::chrono::milliseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--version") {
    std::printf("example_timer_and_client (UCP) %s\n", UCP_VERSION_STRING);
    return 0;
  }
  uint16_t port = static_cast<uint16_t>(argc > 1 ? std::atoi(argv[1]) : 9000);
  ucp::LoopOptions options;
  auto loop = ucp::EventLoop::create(options);
  if (!loop) {
    std::fprintf(stderr, "%s\n",
                 ucp::EventLoop::describe_setup_error(loop.error(), options).c_str());
    return 1;
  }
  (*loop)->spawn([](ucp::EventLoop& l, uint16_t p) -> ucp::Task<> {
    co_await talk(l, p);
    l.stop();
  }(**loop, port));
  (*loop)->run();
}
