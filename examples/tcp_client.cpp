// A TCP client: connect (a name goes through the resolver, off the loop), send a line, read the
// answer with a timeout, close. The connection is the same TcpConnection a server handler gets.
// Usage: bin/example_tcp_client [HOST] [PORT]   (default localhost 9000: bin/example_echo_server)

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ucp/net/TcpClient.h"

namespace {

ucp::Task<> talk(ucp::EventLoop& loop, std::string host, uint16_t port) {
  ucp::ClientOptions options;
  options.connect_timeout_ms = 3000;  // resolution + every address tried
  options.read_timeout_ms = 1000;     // each read below
  auto conn = co_await ucp::TcpClient::connect(loop, host, port, options);
  if (!conn) {  // connection_refused, timed_out, a resolver error ("Name or service not known")
    std::printf("connect to %s:%u: %s\n", host.c_str(), port, conn.error().message().c_str());
    co_return;
  }
  std::printf("connected to %s\n", conn->peer().to_string().c_str());

  const std::string line = "hello from ucp\n";
  if (auto sent = co_await conn->write_all(std::span(line)); !sent) {
    std::printf("write: %s\n", sent.error().message().c_str());
    co_return;  // dropping the connection closes it in the background
  }
  std::string reply;
  while (reply.find('\n') == std::string::npos) {
    char buffer[256];
    auto n = co_await conn->read(buffer);
    if (!n || *n == 0) {  // timed_out after 1 s without data, an error, or the peer closed
      std::printf("read: %s\n", n ? "closed by the peer" : n.error().message().c_str());
      co_return;
    }
    reply.append(buffer, *n);
  }
  std::printf("got %s", reply.c_str());
  co_await conn->close();
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = argc > 1 ? argv[1] : "localhost";
  auto port = static_cast<uint16_t>(argc > 2 ? std::atoi(argv[2]) : 9000);
  ucp::LoopOptions options;
  auto loop = ucp::EventLoop::create(options);
  if (!loop) {
    std::fprintf(stderr, "%s\n",
                 ucp::EventLoop::describe_setup_error(loop.error(), options).c_str());
    return 1;
  }
  loop->spawn([](ucp::EventLoop& l, std::string h, uint16_t p) -> ucp::Task<> {
    co_await talk(l, std::move(h), p);
    l.stop();
  }(**loop, std::move(host), port));
  loop->run();
}
