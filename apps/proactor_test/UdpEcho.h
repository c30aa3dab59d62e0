#pragma once
// UdpEchoServer: proactor_test's protocol = udp_echo. Every datagram arriving on
// server.ip:server.port goes back to its sender unchanged (0 to 65,507 bytes over IPv4, 65,527
// over IPv6).
//
// One UDP socket per worker loop, all bound to the port with SO_REUSEPORT (the kernel spreads
// the senders by their address; one sender always reaches the same worker), each with
// server.udp_recv_buffer_bytes of SO_RCVBUF. A worker's echo takes every datagram that has
// arrived in one receive_batch() (lent from the loop's receive buffers, no copy) and sends them
// all back in one send_batch() from the same buffers. docs/benchmarks.md has the measurements
// behind the choice of one socket per worker.
//
// With a multicast group (server.udp_multicast_group), worker 0's socket joins it on
// server.udp_multicast_interface and echoes the group's datagrams to their senders too (one
// socket joins, so that each datagram is answered once; the others hear unicast only).
//
// With server.udp_metrics_port, every socket counts its traffic into one UdpMetrics (a shard per
// worker; ucp/net/UdpMetrics.h) and an HTTP listener of its own thread on
// server.ip:udp_metrics_port answers GET /metrics with the ucp_udp_* families, process_* and
// ucp_build_info. Without it nothing is counted.
//
// The main loop only reads signals. Thread contract: as Service (ucp/app/Service.h).

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ucp/app/Config.h"
#include "ucp/app/Service.h"
#include "ucp/coro/Task.h"
#include "ucp/http/HttpServer.h"
#include "ucp/io/EventLoop.h"
#include "ucp/metrics/Registry.h"
#include "ucp/net/EventLoopThreadPool.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/Multicast.h"
#include "ucp/net/TcpServer.h"
#include "ucp/net/UdpMetrics.h"
#include "ucp/net/UdpSocket.h"

namespace ucp::app {

/// Echoes datagrams on `socket` until it is closed.
Task<> udp_echo(UdpSocket& socket);

/// udp_echo's receive buffers: one datagram per buffer, so a buffer holds the largest UDP
/// payload (65,527 bytes) and its 48-byte header: 17 pages. At most kUdpEchoBuffers of them
/// per worker (71 MiB of address space; pages become resident as datagrams touch them).
inline constexpr uint32_t kUdpEchoBufferBytes = 69632;
inline constexpr uint32_t kUdpEchoBuffers = 1024;

/// For server.protocol = udp_echo: raises event_loop.provided_buffer_size to
/// kUdpEchoBufferBytes (and caps the count at kUdpEchoBuffers) when it is smaller, so that
/// every datagram fits a receive buffer (Application::adjust_loop_options).
void raise_udp_echo_buffers(const Config& config, LoopOptions& loop);

class UdpEchoServer final : public Service {
 public:
  /// `receive_buffer_bytes`: server.udp_recv_buffer_bytes (0: the kernel's default);
  /// `metrics_port`: server.udp_metrics_port (0: no counting, no listener).
  UdpEchoServer(const ServerOptions& options, uint32_t receive_buffer_bytes,
                const LoopOptions& loop_options,
                std::optional<MulticastGroup> multicast = std::nullopt, uint16_t metrics_port = 0);
  ~UdpEchoServer() override;

  Result<void, Error> start(std::string* warnings) override;
  void run() override;
  void stop() noexcept override;
  void stop_now() noexcept override { stop(); }  // nothing to drain: a datagram is sent or not
  EventLoop& main_loop() noexcept override { return *main_loop_; }
  std::string listening() const override;
  std::string describe_loops() const override;

 private:
  Result<void, Error> bind_all(const InetAddress& address, std::string* warnings);
  Result<void, Error> start_metrics_listener();
  void close_all() noexcept;
  void stop_metrics_listener() noexcept;

  ServerOptions config_;
  uint32_t udp_recv_buffer_bytes_;
  LoopOptions loop_options_;
  std::optional<MulticastGroup> multicast_;
  uint16_t metrics_port_;
  // Declared before the sockets and the listener: it outlives what counts into it and scrapes.
  std::unique_ptr<UdpMetrics> metrics_;
  metrics::Registry registry_;
  std::unique_ptr<http::HttpServer> metrics_listener_;
  std::thread metrics_thread_;
  std::unique_ptr<EventLoop> main_loop_;
  std::unique_ptr<EventLoopThreadPool> pool_;
  std::vector<std::unique_ptr<UdpSocket>> sockets_;  // sockets_[i] lives on worker i
  InetAddress local_;
  bool multishot_ = false;
  uint32_t receive_buffer_bytes_ = 0;
  bool closing_ = false;
};

}  // namespace ucp::app
