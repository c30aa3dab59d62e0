// A UDP echo server on one loop: every datagram goes back to its sender. Datagrams arrive in
// batches lent from the loop's receive buffers (sized here to hold the largest datagram) and
// go back from those same buffers, a batch per submission. It runs as a LoopService on the
// runtime (ucp/app/LoopService.h): Ctrl-C stops it, --set and --help work.
// Usage: bin/example_udp_echo [--set server.port=9000]   (try: echo hi | nc -u -w1 127.0.0.1 9000)

#include <array>

#include "ucp/app/Application.h"
#include "ucp/app/LoopService.h"
#include "ucp/log/Logger.h"
#include "ucp/net/UdpSocket.h"

namespace {

ucp::Task<> serve(ucp::EventLoop& loop, ucp::InetAddress address) {
  ucp::UdpOptions options;
  options.receive_buffer_bytes = 4 << 20;  // datagrams that may wait while we are busy
  auto socket = ucp::UdpSocket::bind(loop, address, options);
  if (!socket) {
    LOG_ERROR("bind {}: {}", address.to_string(), socket.error().message());
    co_return;  // the program ends
  }
  LOG_INFO("listening on {} (udp, {})", socket->local_address().to_string(),
           socket->multishot() ? "batched receives" : "one recvmsg at a time");
  std::array<ucp::ReceivedDatagram, 64> batch;
  std::array<ucp::OutgoingDatagram, 64> replies;
  for (;;) {
    auto n = co_await socket->receive_batch(batch);  // waits for at least one
    if (!n) {
      if (n.error() == std::errc::operation_canceled) break;  // a stop signal
      continue;  // one datagram's error; the socket goes on
    }
    for (size_t i = 0; i < *n; ++i) {
      replies[i] = {batch[i].data.bytes(), batch[i].source, batch[i].source_length};
    }
    co_await socket->send_batch(std::span(replies.data(), *n));
    for (size_t i = 0; i < *n; ++i) batch[i].data.reset();  // the buffers go back to the loop
  }
  co_await socket->close();
}

}  // namespace

int main(int argc, char** argv) {
  ucp::app::Application app("example_udp_echo");
  // A receive buffer holds a whole datagram (65,527 bytes) and its header.
  app.schema().set_defaults({"server.port=9000", "event_loop.provided_buffers_count=256",
                             "event_loop.provided_buffer_size=69632", "log.file="});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  const ucp::ServerOptions where = app.server_options();
  const auto address = *ucp::InetAddress::parse(where.ip, where.port);  // server.ip is checked
  ucp::app::LoopService service(app.loop_options(),
                                [address](ucp::EventLoop& loop) { return serve(loop, address); });
  return app.serve(service, "udp_echo");
}
