#include "UdpEcho.h"

#include <algorithm>
#include <array>
#include <future>

#include "ucp/log/Logger.h"
#include "ucp/metrics/ProcessMetrics.h"

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
                             const LoopOptions& loop_options,
                             std::optional<MulticastGroup> multicast, uint16_t metrics_port)
    : config_(options),
      udp_recv_buffer_bytes_(receive_buffer_bytes),
      loop_options_(loop_options),
      multicast_(std::move(multicast)),
      metrics_port_(metrics_port) {}

void raise_udp_echo_buffers(const Config& config, LoopOptions& loop) {
  if (config.get<std::string>("server.protocol") != "udp_echo") return;
  const uint32_t count = loop.provided_buffers_count.value_or(0);
  if (count == 0 || loop.provided_buffer_size >= kUdpEchoBufferBytes) return;
  loop.provided_buffer_size = kUdpEchoBufferBytes;
  loop.provided_buffers_count = std::min(count, kUdpEchoBuffers);
}

UdpEchoServer::~UdpEchoServer() {
  stop_metrics_listener();
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
  if (metrics_port_ != 0) {
    metrics_ = std::make_unique<UdpMetrics>(pool_->loops().size());
    if (auto added = metrics_->add_to(registry_); !added) return added;
    registry_.add_collector(metrics::write_process_metrics);
    registry_.add_collector(metrics::write_build_info);
  }
  if (auto bound = bind_all(*address, warnings); !bound) return bound;
  return start_metrics_listener();
}

// GET /metrics on server.ip:udp_metrics_port, one thread of its own, a few connections: a
// scrape reads the counters (relaxed loads) and never visits the workers.
Result<void, Error> UdpEchoServer::start_metrics_listener() {
  if (metrics_port_ == 0) return {};
  ServerOptions options;  // not the echo's: no takeover fds, no pinning, one thread
  options.ip = config_.ip;
  options.port = metrics_port_;
  options.thread_num = 1;
  options.max_connections = 64;
  options.shutdown_timeout_ms = 500;
  LoopOptions loop;
  loop.backend = loop_options_.backend;
  loop.ring_entries = 256;
  metrics_listener_ = std::make_unique<http::HttpServer>(options, loop, http::HttpOptions{});
  metrics_listener_->router().get("/metrics",
                                  [this](http::Request&, http::Response& res) -> Task<> {
                                    res.set_content_type(metrics::kContentType);
                                    registry_.render(res.body_buffer());
                                    co_return;
                                  });
  if (auto started = metrics_listener_->start(); !started) {
    close_all();
    const std::string where = options.ip + ":" + std::to_string(metrics_port_);
    if (started.error().code == std::errc::address_in_use) {
      return Unexpected{Error("cannot listen on " + where +
                                  " for /metrics: address already in use; stop the other server "
                                  "or choose another server.udp_metrics_port",
                              started.error().code)};
    }
    return Unexpected{Error(
        "/metrics listener on " + where + " (server.udp_metrics_port): " + started.error().message,
        started.error().code)};
  }
  metrics_thread_ = std::thread([this] { metrics_listener_->run(); });
  return {};
}

void UdpEchoServer::stop_metrics_listener() noexcept {
  if (!metrics_thread_.joinable()) return;
  metrics_listener_->stop();
  metrics_thread_.join();
}

std::string UdpEchoServer::listening() const {
  std::string out = local_.to_string() + " (udp)";
  if (metrics_listener_) out += ", /metrics on " + metrics_listener_->local_address().to_string();
  return out;
}

// Each socket is made on its worker's thread (a loop's state is touched by its thread only),
// one after the other: the first learns the port when server.port is 0.
Result<void, Error> UdpEchoServer::bind_all(const InetAddress& address, std::string* warnings) {
  const auto& loops = pool_->loops();
  sockets_.resize(loops.size());
  UdpOptions options;
  options.receive_buffer_bytes = udp_recv_buffer_bytes_;
  options.reuse_port = loops.size() > 1;
  options.metrics = metrics_.get();
  InetAddress where = address;
  for (size_t i = 0; i < loops.size(); ++i) {
    EventLoop& loop = *loops[i];
    std::promise<Result<std::unique_ptr<UdpSocket>>> made;
    auto result = made.get_future();
    const MulticastGroup* group = i == 0 && multicast_ ? &*multicast_ : nullptr;
    std::error_code join_error;
    loop.post([&loop, &made, &where, &options, group, &join_error] {
      auto socket = UdpSocket::bind(loop, where, options);
      if (socket && group != nullptr) {
        if (auto joined = (*socket)->join(*group); !joined) {
          join_error = joined.error();
          socket = Unexpected{joined.error()};
        }
      }
      if (socket) loop.spawn(udp_echo(**socket));
      made.set_value(std::move(socket));
    });
    auto socket = result.get();
    if (join_error) {
      close_all();
      return Unexpected{Error("cannot join the multicast group " + group->group.ip() +
                                  (group->interface.empty() ? "" : " on " + group->interface) +
                                  " (server.udp_multicast_group): " + join_error.message(),
                              join_error)};
    }
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
  stop_metrics_listener();
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
  std::string group;
  if (multicast_) {
    group = ", worker 0 in multicast group " + multicast_->group.ip() + " on " +
            (multicast_->interface.empty() ? "the kernel's interface" : multicast_->interface);
  }
  return std::to_string(loops.size()) + " worker(s), one UDP socket each" +
         (loops.size() > 1 ? " (SO_REUSEPORT)" : "") + group + ", receive " +
         (multishot_ ? "into the loop's receive buffers (batched)" : "one recvmsg at a time") +
         ", SO_RCVBUF " + std::to_string(receive_buffer_bytes_) + " bytes; " +
         loops.front()->describe() + "; " + pool_->describe_placement();
}

}  // namespace ucp::app
