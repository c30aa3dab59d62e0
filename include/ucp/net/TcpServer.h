#pragma once
// TcpServer: the entry point. It owns the main loop (which accepts) and the worker pool
// (which owns connections). Each accepted socket is handed to the next worker round-robin,
// where a coroutine runs the user's handler, then closes the connection. Two hand-off paths:
//   - EventLoop::post (default): the lock-free task queue plus the worker's eventfd;
//   - msg_ring_handoff: the main ring sends the fd number straight into the worker's ring
//     (IORING_OP_MSG_RING). Until the main ring's own CQE confirms delivery the fd is still
//     the main loop's; a failed send falls back to post for that connection.
//
//   ucp::TcpServer server(options, loop_options, [](ucp::TcpConnection& c) { return echo(c); });
//   if (auto error = server.start(); !error.empty()) { /* print, exit 1 */ }
//   server.run();  // until stop()
//
// Thread contract: construct, start and run on one thread (it becomes the main loop's);
// stop() from any thread. The handler is called on worker threads, concurrently.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/MultishotAccept.h"
#include "ucp/io/Operations.h"
#include "ucp/net/EventLoopThreadPool.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpConnection.h"

namespace ucp {

class RingHandOff;

struct ServerOptions {
  std::string ip = "0.0.0.0";
  uint16_t port = 8888;
  uint32_t thread_num = 1;          // 0 = one per CPU
  uint32_t read_timeout_ms = 5000;  // 0 = none
  uint32_t max_connections = 100000;
  ListenOptions listen;
  bool tcp_nodelay = true;
  // Graceful stop: how long connections get to finish; also how long close() waits for a
  // peer that takes none of its queued output before dropping it.
  uint32_t shutdown_timeout_ms = 5000;
  // Hand accepted fds to workers with IORING_OP_MSG_RING instead of post + eventfd
  // ([event_loop] msg_ring_handoff). Without kernel support: one warning, then post.
  bool msg_ring_handoff = false;
  uint64_t max_output_bytes = 4194304;  // per connection: write() waits above it
  // Output that waits this long for the peer to take a byte fails with timed_out and the
  // connection stops reading (its handler then returns and it closes). 0 = never.
  uint32_t write_timeout_ms = 0;
  // An already-listening TCP socket to accept on instead of binding ip:port (socket
  // activation: ucp/net/SocketActivation.h); -1 = bind. start() takes ownership of it, and
  // ip, port and listen are then unused.
  int listen_fd = -1;
};

class TcpServer {
 public:
  using Handler = std::function<Task<>(TcpConnection&)>;

  TcpServer(const ServerOptions& options, const LoopOptions& loop_options, Handler handler);
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;
  ~TcpServer();

  /// Creates the rings, binds and listens. Returns "" or one line saying what failed and
  /// what to do (port in use, io_uring unavailable...). Optional features the machine
  /// cannot give are appended to `warnings`, one line each.
  std::string start(std::string* warnings = nullptr);
  /// Accepts on the calling thread until stop(); returns once every worker has stopped.
  void run();
  /// Any thread. Graceful: stop accepting, let handlers finish writing what they have
  /// read, close connections; after shutdown_timeout_ms everything still open is cancelled.
  void stop() noexcept;
  /// Any thread. Like stop(), without the wait: whatever is still open is cancelled at once
  /// (also when called while a graceful stop is waiting, e.g. on an operator's second SIGTERM).
  void stop_now() noexcept;

  const InetAddress& local_address() const noexcept { return local_; }
  /// One line naming the backend and what the worker loops run with (after start()).
  std::string describe_loops() const;
  EventLoop& main_loop() noexcept { return *main_loop_; }
  size_t connection_count() const noexcept { return live_.load(std::memory_order_relaxed); }
  uint64_t rejected_connections() const noexcept {
    return rejected_.load(std::memory_order_relaxed);
  }
  /// Connections a worker received through IORING_OP_MSG_RING (the rest went through post).
  uint64_t ring_hand_offs() const noexcept;

 private:
  struct Worker;
  struct ConnectionNode {
    TcpConnection* connection;
    ConnectionNode* prev = nullptr;
    ConnectionNode* next = nullptr;
  };
  Task<> accept_loop();
  Task<> multishot_accept_loop();
  Task<> accept_backoff(std::error_code error);
  static void on_multishot_accept(void* self, int fd) noexcept;
  Task<> serve(Worker& worker, io::Accepted accepted);
  Task<> shutdown_sequence();
  void hand_off(io::Accepted accepted);
  void post_to_worker(Worker& worker, io::Accepted accepted);
  static void deliver_from_ring(void* self, size_t index, UniqueFd fd, bool closing);
  static void fall_back_from_ring(void* self, size_t index, UniqueFd fd);
  Task<> accept_connections();
  bool warn_allowed(std::chrono::steady_clock::time_point& last) noexcept;

  ServerOptions options_;
  LoopOptions loop_options_;
  Handler handler_;
  std::unique_ptr<EventLoop> main_loop_;
  std::unique_ptr<EventLoopThreadPool> pool_;
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t next_worker_ = 0;
  std::unique_ptr<RingHandOff> ring_hand_off_;  // opt-in: msg_ring_handoff
  UniqueFd listen_fd_;
  InetAddress local_;
  std::atomic<size_t> live_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> stop_now_{false};  // end the graceful stop's wait early
  bool shutting_down_ = false;
  bool accept_waiting_ = false;
  std::chrono::steady_clock::time_point last_fd_warning_{};
  std::chrono::steady_clock::time_point last_limit_warning_{};
};

}  // namespace ucp
