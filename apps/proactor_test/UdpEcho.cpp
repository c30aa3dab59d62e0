#include "UdpEcho.h"

#include <algorithm>
#include <array>
#include <future>

#include "ucp/log/Logger.h"

namespace ucp::app {

Task<> udp_echo(UdpSocket& socket) {
  // 64 datagrams a round: the receive hands over what has arrived (up to this many), the send
  // puts them all in flight at once from the very buffers they arrived in.
  std::array<ReceivedDatagram, 64> batch;
  std::array<OutgoingDatagram, 64> replies;
  for (;;) {
    auto n = co_await socket.receive_batch(batch);
    if (!n) {
      if (n.error() == std::errc::operation_canceled) co_return;  // closed
      LOG_DEBUG("udp_echo: receive: {}", n.error().message());
      continue;  // one datagram's error (an ICMP report); the socket goes on
    }
    for (size_t i = 0; i < *n; ++i) {
      replies[i] = OutgoingDatagram(batch[i].data.bytes(), batch[i].source, batch[i].source_length);
    }
    if (auto sent = co_await socket.send_batch(std::span(replies.data(), *n)); !sent) {
      LOG_DEBUG("udp_echo: send: {}", sent.error().message());
    }
    for (size_t i = 0; i < *n; ++i) batch[i] = ReceivedDatagram{};  // buffers back to the loop
  }
}

UdpEchoServer::UdpEchoServer(const ServerOptions& options, uint32_t receive_buffer_bytes,
                             const LoopOptions& loop_options)
    : config_(options), udp_recv_buffer_bytes_(receive_buffer_bytes), loop_options_(loop_options) {}

void raise_udp_echo_buffers(const Config& config, LoopOptions& loop) {
  if (config.get<std::string>("server.protocol") != "udp_echo") return;
  if (loop.provided_buffers_count == 0 || loop.provided_buffer_size >= kUdpEchoBufferBytes) return;
  loop.provided_buffer_size = kUdpEchoBufferBytes;
  loop.provided_buffers_count = std::min(loop.provided_buffers_count, kUdpEchoBuffers);
}

UdpEchoServer::~UdpEchoServer() {
  if (pool_) {
    close_all();
    pool_->join();
  }
}

Result<void, Error> UdpEchoServer::start(std::string* warnings) {
  const auto address = InetAddress::parse(config_.ip, config_.port);
  if (!address) {
    return Unexpected{Error("server.ip: '" + config_.ip + "' is not a numeric IPv4/IPv6 address",
                            make_error_code(std::errc::invalid_argument))};
  }
  LoopOptions main_options = loop_options_;  // it only reads signals
  main_options.provided_buffers_count = 0;
  main_options.registered_buffers_count = 0;
  main_options.ring_entries = 64;
  main_options.busy_poll_us = 0;  // nothing to poll for: the workers receive
  auto main_loop = EventLoop::create(main_options);
  if (!main_loop) {
    return Unexpected{
        Error(EventLoop::describe_setup_error(main_loop.error(), main_options), main_loop.error())};
  }
  main_loop_ = std::move(*main_loop);
  pool_ = std::make_unique<EventLoopThreadPool>(config_.thread_num, loop_options_, nullptr,
                                                config_.cpu_affinity);
  if (auto started = pool_->start(warnings); !started) return started;
  pool_->place_main_thread();  // this thread runs the main loop
  return bind_all(*address, warnings);
}

// Each socket is made on its worker's thread (a loop's state is touched by its thread only),
// one after the other: the first learns the port when server.port is 0.
Result<void, Error> UdpEchoServer::bind_all(const InetAddress& address, std::string* warnings) {
  const auto& loops = pool_->loops();
  sockets_.resize(loops.size());
  UdpOptions options;
  options.receive_buffer_bytes = udp_recv_buffer_bytes_;
  options.reuse_port = loops.size() > 1;
  InetAddress where = address;
  for (size_t i = 0; i < loops.size(); ++i) {
    EventLoop& loop = *loops[i];
    std::promise<Result<std::unique_ptr<UdpSocket>>> made;
    auto result = made.get_future();
    loop.post([&loop, &made, &where, &options] {
      auto socket = UdpSocket::bind(loop, where, options);
      if (socket) loop.spawn(udp_echo(**socket));
      made.set_value(std::move(socket));
    });
    auto socket = result.get();
    if (!socket) {
      close_all();
      if (socket.error() == std::errc::address_in_use) {
        return Unexpected{Error("cannot bind UDP " + where.to_string() +
                                    ": address already in use; stop the other server or choose "
                                    "another server.port",
                                socket.error())};
      }
      return Unexpected{
          Error("cannot bind UDP " + where.to_string() + ": " + socket.error().message(),
                socket.error())};
    }
    sockets_[i] = std::move(*socket);
    if (i == 0) {
      local_ = sockets_[0]->local_address();
      where = local_;
      multishot_ = sockets_[0]->multishot();
      receive_buffer_bytes_ = sockets_[0]->receive_buffer_bytes();
    }
  }
  const uint32_t asked = udp_recv_buffer_bytes_;
  if (asked > 0 && receive_buffer_bytes_ < asked && warnings != nullptr) {
    *warnings += "server.udp_recv_buffer_bytes: asked for " + std::to_string(asked) +
                 " bytes, the kernel gave " + std::to_string(receive_buffer_bytes_) +
                 " (net.core.rmem_max caps it without CAP_NET_ADMIN; raise it with sysctl -w "
                 "net.core.rmem_max=" +
                 std::to_string(asked) + ")\n";
  }
  return {};
}

void UdpEchoServer::run() {
  main_loop_->run();
  close_all();
  pool_->join();
}

void UdpEchoServer::stop() noexcept { main_loop_->stop(); }

// Each worker closes its socket (its echo returns) and stops.
void UdpEchoServer::close_all() noexcept {
  if (std::exchange(closing_, true)) return;
  const auto& loops = pool_->loops();
  for (size_t i = 0; i < loops.size(); ++i) {
    EventLoop* loop = loops[i].get();
    if (loop == nullptr) continue;
    UdpSocket* socket = i < sockets_.size() ? sockets_[i].get() : nullptr;
    loop->post([loop, socket] {
      loop->spawn([](EventLoop& l, UdpSocket* s) -> Task<> {
        if (s != nullptr) co_await s->close();
        l.stop();
      }(*loop, socket));
    });
  }
}

std::string UdpEchoServer::describe_loops() const {
  const auto& loops = pool_->loops();
  return std::to_string(loops.size()) + " worker(s), one UDP socket each" +
         (loops.size() > 1 ? " (SO_REUSEPORT)" : "") + ", receive " +
         (multishot_ ? "into the loop's receive buffers (batched)" : "one recvmsg at a time") +
         ", SO_RCVBUF " + std::to_string(receive_buffer_bytes_) + " bytes; " +
         loops.front()->describe() + "; " + pool_->describe_placement();
}

}  // namespace ucp::app
