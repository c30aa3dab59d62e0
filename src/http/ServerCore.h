#pragma once
// The inside of HttpServer: state shared by all connections (ServerCore), the per-worker
// counters, and one connection's state (Connection) with its pooled request/response state
// (Session). Private to src/http.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ucp/http/HttpServer.h"
#include "ucp/io/Timer.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/TcpConnection.h"

#include "RequestParser.h"
#include "ResponseEncoder.h"
#include "ServerMetrics.h"

namespace ucp::http::detail {

/// Bodies up to this size are queued as a copy with the other answers of the same read;
/// larger ones go out from where they are (a file piece by piece, each from the read buffer).
constexpr size_t kSmallFileBytes = 16 * 1024;

/// The answer when no route matched: 405 with Allow when the path has routes for other
/// methods, else 404 (Middleware.cpp).
Task<> not_routed(Response& response, Router::MethodSet allowed);

/// One worker's counters. Only that worker's thread writes them (a plain load and store,
/// no locked instruction); /metrics reads them from any thread.
struct alignas(64) WorkerSlot {
  std::atomic<const EventLoop*> loop{nullptr};
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> responses[4] = {};  // 2xx..5xx
  std::atomic<uint64_t> informational{0};   // 101
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> bytes_sent{0};

  static void add(std::atomic<uint64_t>& counter, uint64_t n) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  static void subtract(std::atomic<uint64_t>& counter, uint64_t n) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  void count_response(int status) noexcept {
    if (status >= 200 && status < 600) {
      add(responses[status / 100 - 2], 1);
    } else if (status >= 100 && status < 200) {
      add(informational, 1);
    }
  }
};

/// A connection that left HTTP with a 101: what takes it over, the bytes that followed the
/// request, and the counters to bring up to date when it ends. Allocated only then, so that the
/// frame of a plain HTTP connection's outer coroutine stays small.
struct Upgrade {
  UpgradeHandler handler;
  BufferLease received;
  uint64_t counted_read = 0;  // the connection's bytes already added to the slot
  uint64_t counted_written = 0;
  UpgradeKeep keep = UpgradeKeep::kUntilReturn;
};

struct ServerCore {
  ServerCore(const HttpOptions& http_options, size_t workers);

  /// The connection coroutine (TcpServer's handler): HTTP, then whatever a 101 switched to.
  Task<> serve(TcpConnection& connection);
  /// The HTTP part. Its frame (the Connection, the receive in flight) is gone once it returns,
  /// so a connection that switched protocols carries none of it.
  Task<> serve_http(TcpConnection& connection, std::unique_ptr<Upgrade>& upgrade);
  /// The calling loop's counters (claimed on first use).
  WorkerSlot* slot_for(const EventLoop& loop) noexcept;
  /// What serve() holds once a 101 switched the connection (Connection.cpp).
  class Switched;

  HttpOptions options;
  ParserLimits limits;
  Router router;
  std::vector<Middleware> middleware;
  std::unique_ptr<WorkerSlot[]> slots;
  size_t slot_count;
  // HttpServer::drain: answers end their connection. Read once per request (a plain load).
  std::atomic<bool> draining{false};
  // ServerOptions::tls was set: /metrics adds the handshake counters.
  bool tls = false;
  // HttpServer::enable_metrics. `request_metrics` is set by start() before any worker runs and
  // read once per request: null, one branch and no clock read.
  std::unique_ptr<ServerMetrics> metrics;
  RequestMetrics* request_metrics = nullptr;
};

/// What a connection holds while it handles requests: taken from the loop's pool when the
/// first byte of a request arrives, given back when the connection is idle again, so an
/// idle keep-alive connection holds none of it.
struct Session {
  explicit Session(const ParserLimits& limits) noexcept : parser(limits) {}
  RequestParser parser;
  Response response;
  OutBuffer out;
  uint32_t route = Router::kNoRoute;  // the route the request being answered matched

  /// From the calling thread's cache of idle sessions (a reset instead of a construction),
  /// else a new one from the pool.
  static Session* acquire(const ParserLimits& limits);
  /// Back to the cache when it can serve another connection, else destroyed.
  static void release(Session* session) noexcept;
};
static_assert(sizeof(Session) <= MemoryPool::kMaxBlockSize, "Session must fit a pool block");

/// Owns a Session between acquire and release.
struct SessionRelease {
  void operator()(Session* session) const noexcept { Session::release(session); }
};
using SessionPtr = std::unique_ptr<Session, SessionRelease>;

/// One connection's HTTP state. Lives in the connection coroutine's frame. Its read deadline is
/// a loop timer, its base: it fires on the loop thread after the completions of an iteration
/// and only stops the reading (TcpConnection::stop_reading schedules the waiting receive).
class Connection : private TimerNode {
 public:
  enum class Outcome : uint8_t { kKeepGoing, kClose, kLinger, kUpgrade };

  Connection(ServerCore& core, TcpConnection& tcp) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  /// Before each receive(): the deadline for what the connection is waiting for.
  void arm_read_timer() noexcept;
  void cancel_read_timer() noexcept { tcp_.loop().cancel_timer(*this); }
  /// Handles the requests in `received` (taken, so it is empty after): every complete one is
  /// answered, in order.
  Task<Outcome> process(BufferLease& received);
  /// After Outcome::kUpgrade: what takes the connection over (the connection then stays counted
  /// as open until that ends).
  std::unique_ptr<Upgrade> take_upgrade() noexcept;
  /// receive() failed: logs it; true if it is a timeout in the middle of a request, to be
  /// answered with time_out_request(). A plain function, so that the error is not kept in
  /// serve_http()'s frame across that answer.
  bool read_failed(std::error_code error);
  /// The 408 answer to a request whose read timed out, then FIN.
  Task<> time_out_request();
  /// After an error response: send FIN, then read and drop what the client still sends
  /// (bounded by linger_timeout_ms) so that closing does not reset the response away.
  Task<> linger();

  /// Queues a copy of `bytes` (waiting while the output queue is full), or with
  /// `wait_for_kernel` sends them from the caller's memory and waits until all are taken.
  /// http.send_timeout_ms bounds the wait: it is the connection's write deadline, so a peer
  /// that takes nothing that long fails every write (and read) with timed_out.
  TcpConnection::WriteAwaiter send(std::string_view bytes, bool wait_for_kernel = false) noexcept {
    const auto data = std::as_bytes(std::span(bytes.data(), bytes.size()));
    if (wait_for_kernel) return tcp_.write_all(data);
    return tcp_.write(data);
  }
  /// FILE SENDER: the one function that moves file bytes to the socket: small files by
  /// bounded reads through the ring, then sends; large ones by send_file_direct.
  Task<Result<void>> send_file(int fd, uint64_t offset, uint64_t length);
  /// Through io::send_file (splice on io_uring, sendfile(2) on epoll), bounded by the send
  /// timeout per window without progress.
  Task<Result<void>> send_file_direct(int fd, uint64_t offset, uint64_t length);

  // For Response::write (streams).
  Session& session() noexcept { return *session_; }
  /// Encodes a stream's head into the session's out buffer.
  void start_stream(Response& response) noexcept;
  bool head_only() const noexcept { return head_only_; }
  Framing framing() const noexcept { return framing_; }

 private:
  friend HookAccess;
  void on_read_timer() noexcept;
  /// The read deadline `ms` from now; 0: none.
  void start_read_timer(uint32_t ms) noexcept;
  /// Answers the request the parser completed; false: close after it.
  Task<bool> respond();
  /// The answered request's duration into the worker's histograms (enable_metrics()).
  void record_request(RequestMetrics& metrics,
                      std::chrono::steady_clock::time_point started) noexcept;
  /// Sends the 101 head of a response that switches protocols and keeps what takes over.
  Task<bool> switch_protocols(Request& request, Response& response);
  /// Encodes the head of a finished response, or of a stream (`streaming`), into the session's
  /// out buffer; decides the framing and keep-alive.
  void prepare_head(const Request& request, Response& response, bool streaming) noexcept;
  /// A response the server makes itself (errors, 100 Continue excepted): closes after it.
  Task<> send_error(int status, std::string_view reason);
  void account() noexcept;

  ServerCore& core_;
  TcpConnection& tcp_;
  WorkerSlot* slot_;
  SessionPtr session_;
  std::unique_ptr<Upgrade> upgrade_;     // the 101 answered: what comes next
  Clock::time_point request_started_{};  // when the unfinished request's first byte came
  uint64_t counted_read_ = 0;
  uint64_t counted_written_ = 0;
  uint32_t served_ = 0;
  enum class Waiting : uint8_t { kFirst, kIdle, kHead, kBody, kLinger };
  Waiting waiting_ = Waiting::kFirst;
  bool read_timed_out_ = false;
  bool upgrading_ = false;  // respond() sent a 101 that switches protocols
  // The response being sent.
  Framing framing_ = Framing::kNone;
  bool head_only_ = false;
  bool keep_alive_ = true;
};

}  // namespace ucp::http::detail
