#pragma once
// TcpServer: the entry point. It owns the main loop and the worker pool (which owns
// connections); on a worker a coroutine runs the user's handler, then closes the connection.
// Who accepts (ServerOptions::acceptors):
//   - kMain (default): the main loop accepts and hands each socket to the next worker,
//     round-robin, through one of two paths:
//       - EventLoop::post (default): the lock-free task queue plus the worker's eventfd;
//       - msg_ring_handoff: the main ring sends the fd number straight into the worker's ring
//         (IORING_OP_MSG_RING). Until the main ring's own CQE confirms delivery the fd is
//         still the main loop's; a failed send falls back to post for that connection.
//   - kPerWorker: every worker loop listens on a socket of its own, all bound to the same
//     address with SO_REUSEPORT, and accepts on it directly (no hand-off). The kernel picks
//     the socket, and so the worker, by a hash of each connection's addresses and ports.
//     The main loop then only runs signals, stats and the graceful stop.
// max_connections is one limit across all acceptors (an atomic count, touched once per
// connection).
// With ServerOptions::tls every connection is TLS: the worker runs the handshake (bounded by
// the context's handshake_timeout_ms) before the handler, and the handler gets the same
// TcpConnection, reading and writing plaintext (docs/tls.md, "Connections").
//
//   ucp::TcpServer server(options, loop_options, [](ucp::TcpConnection& c) { return echo(c); });
//   if (auto started = server.start(); !started) { /* print started.error().message, exit 1 */ }
//   server.run();  // until stop()
//
// Thread contract: construct, start and run on one thread (it becomes the main loop's);
// stop() from any thread, collect_stats() on the main loop. The handler is called on worker
// threads, concurrently.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/net/CpuAffinity.h"
#include "ucp/net/EventLoopThreadPool.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/tls/TlsCounters.h"

namespace ucp {

namespace detail {
class RingHandOff;
}
namespace tls {
class TlsContext;
class TlsContextHolder;
}  // namespace tls

/// Who accepts connections (the [server] acceptors key: main | per_worker).
enum class Acceptors : uint8_t {
  kMain,       // the main loop accepts and hands connections to the workers round-robin
  kPerWorker,  // each worker accepts on its own SO_REUSEPORT listening socket
};

struct ServerOptions {
  std::string ip = defaults::kIp;
  uint16_t port = defaults::kPort;
  uint32_t thread_num = defaults::kThreadNum;           // 0 = one per CPU
  uint32_t read_timeout_ms = defaults::kReadTimeoutMs;  // 0 = none
  uint32_t max_connections = defaults::kMaxConnections;
  ListenOptions listen;
  bool tcp_nodelay = defaults::kTcpNoDelay;
  // Graceful stop: how long connections get to finish; also how long close() waits for a
  // peer that takes none of its queued output before dropping it.
  uint32_t shutdown_timeout_ms = defaults::kShutdownTimeoutMs;
  // Hand accepted fds to workers with IORING_OP_MSG_RING instead of post + eventfd
  // ([event_loop] msg_ring_handoff). Without kernel support: one warning, then post.
  bool msg_ring_handoff = defaults::kMsgRingHandOff;
  uint64_t max_output_bytes = defaults::kMaxOutputBytes;  // per connection: write() waits above it
  // Output that waits this long for the peer to take a byte fails with timed_out and the
  // connection stops reading (its handler then returns and it closes). 0 = never.
  uint32_t write_timeout_ms = defaults::kWriteTimeoutMs;
  // Already-listening TCP sockets to accept on instead of binding ip:port: one a service
  // manager passed (socket activation: ucp/net/SocketActivation.h), or those of the server
  // this process replaces (a takeover: ucp/app/Application.h). start() takes ownership of
  // them, and ip, port and listen are then unused. kPerWorker with one socket per worker:
  // each worker accepts on its own; otherwise the main loop accepts on all (start() warns).
  std::vector<int> listen_fds;
  // kPerWorker sets SO_REUSEPORT on every worker's socket whatever listen.reuse_port says.
  Acceptors acceptors = Acceptors::kMain;
  // Which CPU each worker and the main loop run on (ucp/net/CpuAffinity.h); none by default.
  CpuAffinity cpu_affinity;
  // TLS on every connection: the server context in use (ucp/tls/TlsContextHolder.h), shared
  // so that a reload reaches new connections (established ones keep theirs). Null: plain TCP.
  std::shared_ptr<tls::TlsContextHolder> tls;
  // With tls: what a client that speaks plain HTTP to the port gets in plaintext before the
  // close (HttpServer sets an nginx-style 400). Empty: only the close.
  std::string tls_plaintext_reply;
};

/// One worker loop's counters, read on that loop's thread by TcpServer::collect_stats.
struct WorkerCounters {
  uint64_t connections_open = 0;
  uint64_t connections_accepted = 0;  // served by this worker since start
  uint64_t bytes_received = 0;        // by its connections, open and closed
  uint64_t bytes_sent = 0;
  LoopStats loop;  // its event loop's counters (cumulative)
};

/// A snapshot of a running server (TcpServer::collect_stats). Counters are cumulative.
struct ServerStats {
  std::vector<WorkerCounters> workers;  // empty once a stop has begun
  LoopStats main_loop;
  uint64_t connections_rejected = 0;  // closed at once at max_connections
};

class TcpServer {
 public:
  using Handler = std::function<Task<>(TcpConnection&)>;

  /// A handler of another shape (a plain function, a missing `&`, a Task<bool>) is refused
  /// here, at the caller's line, as not satisfying ConnectionHandler.
  template <ConnectionHandler F>
  TcpServer(const ServerOptions& options, const LoopOptions& loop_options, F&& handler)
      : TcpServer(options, loop_options, Handler(std::forward<F>(handler)), Erased{}) {}
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;
  ~TcpServer();

  /// Creates the rings, binds and listens. On failure the Error's message is one line saying
  /// what failed and what to do (port in use, io_uring unavailable...). Optional features the
  /// machine cannot give are appended to `warnings`, one line each. The calling thread, the
  /// main loop's, becomes ucp-main, pinned where ServerOptions::cpu_affinity says.
  Result<void, Error> start(std::string* warnings = nullptr);
  /// Accepts on the calling thread until stop(); returns once every worker has stopped.
  void run();
  /// Any thread. Graceful: stop accepting, let handlers finish writing what they have
  /// read, close connections; after shutdown_timeout_ms everything still open is cancelled.
  void stop() noexcept;
  /// Any thread. Like stop(), without the wait: whatever is still open is cancelled at once
  /// (also when called while a graceful stop is waiting, e.g. on an operator's second SIGTERM).
  void stop_now() noexcept;
  /// Any thread, after start(). Stops accepting and closes this server's listening sockets;
  /// connections go on (a handler may look at draining() to end its session). For a takeover:
  /// another process accepts on the same sockets, and whatever waits in their queues is its.
  /// stop() ends the rest later.
  void drain() noexcept;
  bool draining() const noexcept { return draining_.load(std::memory_order_relaxed); }
  /// Main loop's thread, before a drain or stop: the listening sockets (still owned here).
  std::vector<int> listening_fds() const;

  const InetAddress& local_address() const noexcept { return local_; }
  /// One line naming the backend and what the worker loops run with (after start()).
  std::string describe_loops() const;
  EventLoop& main_loop() noexcept { return *main_loop_; }
  /// The worker loops, in order (after start()): components that keep state per worker (a
  /// proxy's view of its upstreams) set it up before run() and reach it with post() later.
  std::vector<EventLoop*> worker_loops() const;
  size_t connection_count() const noexcept { return live_.load(std::memory_order_relaxed); }
  uint64_t rejected_connections() const noexcept {
    return rejected_.load(std::memory_order_relaxed);
  }
  /// Connections a worker received through IORING_OP_MSG_RING (the rest went through post).
  uint64_t ring_hand_offs() const noexcept;
  /// With ServerOptions::tls: each worker's handshake counters, in the workers' order (empty
  /// before start()). Any thread; each figure is read on its own (relaxed).
  std::vector<tls::TlsCounters> tls_counters() const;
  /// How connections are accepted after start(): kMain when kPerWorker was asked for with an
  /// inherited socket.
  Acceptors acceptors() const noexcept { return acceptors_; }

  /// Main loop's thread only. Visits each worker loop in turn (resume_on: one post there and
  /// one back) and reads its counters on its own thread, so the connections' paths carry no
  /// atomics for them. Once a stop has begun it returns at once, without the workers.
  Task<ServerStats> collect_stats();

 private:
  struct Erased {};  // the handler is a Handler already
  TcpServer(const ServerOptions& options, const LoopOptions& loop_options, Handler handler, Erased);

  friend class detail::RingHandOff;
  struct Worker;
  struct Acceptor;
  struct ConnectionNode {
    TcpConnection* connection;
    ConnectionNode* prev = nullptr;
    ConnectionNode* next = nullptr;
  };
  Result<void, Error> listen_per_worker(const InetAddress& address, std::string& notes);
  void adopt_listeners(std::vector<UniqueFd> sockets, std::string& notes);
  Task<> start_main_acceptors();
  Task<> close_acceptors();
  Task<> accept_connections(Acceptor& acceptor);
  Task<> accept_loop(Acceptor& acceptor);
  Task<> multishot_accept_loop(Acceptor& acceptor);
  Task<> accept_backoff(Acceptor& acceptor, std::error_code error);
  void on_accepted(Acceptor& acceptor, io::Accepted accepted);
  bool admit(Acceptor& acceptor);
  Task<> close_acceptor(Acceptor& acceptor);
  /// One connection, spawned on its worker's loop: a Spawned, not a Task, so that no wrapper
  /// frame is kept beside this one. The peer is asked for lazily (a multishot accept returns
  /// no address): AF_UNSPEC until then.
  Spawned serve(Worker& worker, UniqueFd fd, InetAddress peer);
  /// serve() for a TLS server: the handshake first (TcpServerTls.cpp).
  Spawned serve_tls(Worker& worker, UniqueFd fd, InetAddress peer);
  /// The coroutine of one new connection: serve() or serve_tls().
  Spawned start_serving(Worker& worker, UniqueFd fd, InetAddress peer);
  /// The worker's copy of the current TLS context (taken again after a reload); null if none.
  const tls::TlsContext* tls_context_for(Worker& worker);
  static void count_handshake(Worker& worker, const TcpConnection& connection,
                              std::error_code failure) noexcept;
  void enlist(Worker& worker, ConnectionNode& node) noexcept;
  void delist(Worker& worker, ConnectionNode& node) noexcept;
  void prepare_accepted(int fd, InetAddress& peer) const;
  static void log_handler_failure(const TcpConnection& connection, const char* what);
  Task<> shutdown_sequence();
  void hand_off(UniqueFd fd, const InetAddress& peer);
  void post_to_worker(Worker& worker, UniqueFd fd, const InetAddress& peer);
  // The ring hand-off's ends (detail::RingHandOff): a connection arrived at worker `index`
  // (closing: that worker stops), and one the ring could not take goes through post instead.
  void deliver_from_ring(size_t index, UniqueFd fd, bool closing);
  void fall_back_from_ring(size_t index, UniqueFd fd);
  static bool warn_allowed(std::chrono::steady_clock::time_point& last) noexcept;

  ServerOptions options_;
  OutputLimits output_limits_;  // every connection's, from options_
  LoopOptions loop_options_;
  Handler handler_;
  std::unique_ptr<EventLoop> main_loop_;
  std::unique_ptr<EventLoopThreadPool> pool_;
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t next_worker_ = 0;
  std::unique_ptr<detail::RingHandOff> ring_hand_off_;  // opt-in: msg_ring_handoff
  Acceptors acceptors_ = Acceptors::kMain;
  // kMain: one, on the main loop; kPerWorker: one per worker, in the workers' order.
  std::vector<std::unique_ptr<Acceptor>> acceptor_list_;
  InetAddress local_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> listeners_open_{0};  // acceptors not yet closed by the shutdown
  std::atomic<uint64_t> rejected_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> stop_now_{false};  // end the graceful stop's wait early
  std::atomic<bool> draining_{false};
  bool shutting_down_ = false;      // main loop's thread
  uint32_t stats_collections_ = 0;  // collect_stats() calls away on a worker (main thread)
};

}  // namespace ucp
