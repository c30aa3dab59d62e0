// A UDP echo server on one loop: every datagram goes back to its sender. Datagrams arrive in
// batches lent from the loop's receive buffers (sized here to hold the largest datagram) and
// go back from those same buffers, a batch per submission.
// Usage: bin/example_udp_echo [PORT]   (default 9000; try: echo hi | nc -u -w1 127.0.0.1 9000)

#include <array>
#include <cstdio>
#include <cstdlib>

#include "ucp/net/UdpSocket.h"

namespace {

ucp::Task<> serve(ucp::EventLoop& loop, uint16_t port) {
  ucp::UdpOptions options;
  options.receive_buffer_bytes = 4 << 20;  // datagrams that may wait while we are busy
  auto socket = ucp::UdpSocket::bind(loop, *ucp::InetAddress::parse("0.0.0.0", port), options);
  if (!socket) {
    std::printf("bind: %s\n", socket.error().message().c_str());
    co_return;
  }
  std::printf("echoing UDP on %s (%s)\n", (*socket)->local_address().to_string().c_str(),
              (*socket)->multishot() ? "batched receives" : "one recvmsg at a time");
  std::array<ucp::ReceivedDatagram, 64> batch;
  std::array<ucp::OutgoingDatagram, 64> replies;
  for (;;) {
    auto n = co_await (*socket)->receive_batch(batch);  // waits for at least one
    if (!n) {
      if (n.error() == std::errc::operation_canceled) break;
      continue;  // one datagram's error; the socket goes on
    }
    for (size_t i = 0; i < *n; ++i) {
      replies[i] = {batch[i].data.bytes(), batch[i].source, batch[i].source_length};
    }
    co_await (*socket)->send_batch(std::span(replies.data(), *n));
    for (size_t i = 0; i < *n; ++i) batch[i] = {};  // the buffers go back to the loop
  }
  co_await (*socket)->close();
}

}  // namespace

int main(int argc, char** argv) {
  const auto port = static_cast<uint16_t>(argc > 1 ? std::atoi(argv[1]) : 9000);
  ucp::LoopOptions options;
  options.provided_buffers_count = 256;
  options.provided_buffer_size = 69632;  // a whole datagram (65,527 bytes) and its header
  auto loop = ucp::EventLoop::create(options);
  if (!loop) {
    std::fprintf(stderr, "%s\n",
                 ucp::EventLoop::describe_setup_error(loop.error(), options).c_str());
    return 1;
  }
  (*loop)->spawn([](ucp::EventLoop& l, uint16_t p) -> ucp::Task<> {
    co_await serve(l, p);
    l.stop();
  }(**loop, port));
  (*loop)->run();
}
