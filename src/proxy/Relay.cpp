#include "ucp/proxy/Relay.h"

#include <chrono>
#include <coroutine>
#include <exception>
#include <utility>

#include <sys/socket.h>

#include "ucp/io/Timer.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/Socket.h"

namespace ucp::proxy {
namespace {

constexpr int kClient = 0;
constexpr int kUpstream = 1;

// The state both directions share; it lives in relay()'s frame.
// Its timer (the idle and total deadlines) is its base.
struct Session : TimerNode {
  Session(TcpConnection& client, TcpConnection& upstream, RelayOptions o, RelayCounters* c) noexcept
      : TimerNode(hook<&Session::on_deadline>), side{&client, &upstream}, options(o), counters(c) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { loop().cancel_timer(deadline()); }

  TimerNode& deadline() noexcept { return *this; }

  EventLoop& loop() const noexcept { return side[kClient]->loop(); }

  void start() {
    const Clock::time_point now = loop().now();
    last_activity = now;
    if (options.total_timeout_ms != 0) {
      total_due = now + std::chrono::milliseconds(options.total_timeout_ms);
    }
    arm(now);
  }

  void arm(Clock::time_point now) {
    Clock::time_point due = total_due;
    if (options.idle_timeout_ms != 0) {
      due = std::min(due, last_activity + std::chrono::milliseconds(options.idle_timeout_ms));
    }
    if (due != Clock::time_point::max()) loop().add_timer(deadline(), std::max(due, now));
  }

  // Bytes moved: the idle deadline is pushed back lazily (the timer, when it fires, finds
  // the later activity and re-arms itself), so a busy relay touches no timer per chunk.
  void moved(int direction, size_t n) noexcept {
    last_activity = loop().now();
    if (direction == kClient) {
      result.client_to_upstream += n;
      if (counters) RelayCounters::add(counters->client_to_upstream, n);
    } else {
      result.upstream_to_client += n;
      if (counters) RelayCounters::add(counters->upstream_to_client, n);
    }
  }

  void on_deadline() noexcept {
    const Clock::time_point now = loop().now();
    if (now >= total_due) {
      stop(RelayEnd::kTotalTimeout);
    } else if (options.idle_timeout_ms != 0 &&
               now >= last_activity + std::chrono::milliseconds(options.idle_timeout_ms)) {
      stop(RelayEnd::kIdleTimeout);
    } else {
      arm(now);
    }
  }

  // Ends both directions: their reads end with operation_canceled and a write waiting for a
  // slow peer is withdrawn. Only schedules the directions (timer callbacks must not resume).
  void stop(RelayEnd why, std::error_code error = {}) noexcept {
    if (ended) return;
    ended = true;
    result.end = why;
    result.error = error;
    loop().cancel_timer(deadline());
    side[kClient]->stop_reading();
    side[kUpstream]->stop_reading();
    for (auto* write : writing) {
      if (write != nullptr) write->cancel();
    }
  }

  static RelayEnd reset_of(int side_index) noexcept {
    return side_index == kClient ? RelayEnd::kClientReset : RelayEnd::kUpstreamReset;
  }
  static RelayEnd error_of(int side_index) noexcept {
    return side_index == kClient ? RelayEnd::kClientError : RelayEnd::kUpstreamError;
  }

  // Side `from` failed (a receive from it, or a send to it). A reset goes on as a reset.
  void failed(int from, std::error_code error, bool sending) noexcept {
    if (ended) return;
    const bool reset =
        error == std::errc::connection_reset || (sending && error == std::errc::broken_pipe);
    if (reset) {
      stop(reset_of(from), error);
      reset_connection(*side[1 - from]);
    } else if (error == std::errc::timed_out) {
      stop(RelayEnd::kIdleTimeout, error);  // its output stalled for the whole write timeout
    } else if (error == std::errc::operation_canceled) {
      stop(RelayEnd::kStopped, error);  // a draining server stopped its reads
    } else {
      stop(error_of(from), error);
    }
  }

  // The pumps' two awaits, each wrapping the connection's own awaiter and handling what ends a
  // direction, so that a pump's frame holds one small awaiter and no Result per step.
  struct Receive {  // true: bytes in the lease; false: the direction has ended
    Session& session;
    int direction;
    TcpConnection::ReadAwaiter read;
    bool await_ready() noexcept { return read.await_ready(); }
    bool await_suspend(std::coroutine_handle<> caller) noexcept {
      return read.await_suspend(caller);
    }
    bool await_resume() noexcept {
      const Result<size_t> received = read.await_resume();
      if (!received) {
        session.failed(direction, received.error(), false);
        return false;
      }
      if (*received == 0) {  // FIN: pass it on; the other direction goes on
        if (!session.ended) session.side[1 - direction]->shutdown_write();
        return false;
      }
      return !session.ended;
    }
  };
  Receive receive(int direction, BufferLease& lease) noexcept {
    return {*this, direction, side[direction]->receive_into(lease)};
  }

  struct Send {  // true: sent; false: the direction has ended
    Session& session;
    int direction;
    TcpConnection::WriteAwaiter write;
    bool await_ready() noexcept { return write.await_ready(); }
    void await_suspend(std::coroutine_handle<> caller) noexcept {
      session.writing[direction] = &write;  // stop() withdraws it
      write.await_suspend(caller);
    }
    bool await_resume() noexcept {
      session.writing[direction] = nullptr;
      const Result<void> sent = write.await_resume();
      if (!sent) session.failed(1 - direction, sent.error(), true);
      return static_cast<bool>(sent);
    }
  };
  Send send(int direction, const BufferLease& lease) noexcept {
    return {*this, direction, side[1 - direction]->write_all(lease.bytes())};
  }

  TcpConnection* side[2];
  RelayOptions options;
  RelayCounters* counters;
  detail::StreamWriter::WriteAwaiter* writing[2] = {nullptr, nullptr};  // by direction
  Clock::time_point last_activity{};
  Clock::time_point total_due = Clock::time_point::max();
  RelayResult result;
  bool ended = false;
};

// The two directions run as two coroutines of their own kind, each its own frame and nothing
// more: relay() starts both and resumes when the second ends. when_all would add a frame of its
// own and one wrapper per direction (about 400 pool bytes per relayed pair, kept as long as the
// connection lives).
struct Join {
  std::coroutine_handle<> parent;
  int running = 0;  // directions not finished, plus one for the parent while it starts them
  std::exception_ptr exception;
};

class Direction {
 public:
  struct promise_type : PoolAllocated {
    Join* join = nullptr;
    struct Final {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(
          std::coroutine_handle<promise_type> self) const noexcept {
        Join& join = *self.promise().join;
        return --join.running == 0 ? join.parent : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    Direction get_return_object() noexcept {
      return Direction(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    Final final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() noexcept {
      if (!join->exception) join->exception = std::current_exception();
    }
  };
  Direction(Direction&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Direction(const Direction&) = delete;
  Direction& operator=(const Direction&) = delete;
  Direction& operator=(Direction&&) = delete;
  ~Direction() {
    if (handle_) handle_.destroy();  // finished, or suspended when its loop shut down
  }
  void start(Join& join) {
    handle_.promise().join = &join;
    ++join.running;
    handle_.resume();
  }

 private:
  explicit Direction(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

// Starts both directions; the parent resumes once both have ended (at once if they ended
// while starting).
struct BothDirections {
  Join& join;
  Direction& first;
  Direction& second;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> parent) {
    join.parent = parent;
    join.running = 1;
    first.start(join);
    second.start(join);
    return --join.running != 0;
  }
  void await_resume() const {
    if (join.exception) std::rethrow_exception(join.exception);
  }
};

// One direction: bytes from side `direction` to the other side, in the buffers the loop lends.
Direction pump(Session& s, int direction, BufferLease lease) {
  // Kept small: every relayed pair holds two of these frames for as long as it lives.
  // No co_await inside && or ||: GCC 12 built that form of this loop so that it never ran.
  for (;;) {
    if (lease.empty()) {
      const bool received = co_await s.receive(direction, lease);
      if (!received) co_return;
    }
    if (s.ended) co_return;
    const bool sent = co_await s.send(direction, lease);
    if (!sent) co_return;
    s.moved(direction, lease.size());
    lease.reset();  // the buffer goes back to the loop: its bytes are in the kernel
  }
}

}  // namespace

const char* to_string(RelayEnd end) noexcept {
  switch (end) {
    case RelayEnd::kClosed:
      return "closed";
    case RelayEnd::kIdleTimeout:
      return "idle timeout";
    case RelayEnd::kTotalTimeout:
      return "total timeout";
    case RelayEnd::kClientReset:
      return "client reset";
    case RelayEnd::kUpstreamReset:
      return "upstream reset";
    case RelayEnd::kClientError:
      return "client error";
    case RelayEnd::kUpstreamError:
      return "upstream error";
    case RelayEnd::kStopped:
      return "stopped";
  }
  return "?";
}

void reset_connection(TcpConnection& connection) noexcept {
  set_linger_reset(connection.fd());
  // connect(AF_UNSPEC) disconnects a TCP socket: the kernel sends a RST now and fails what is
  // pending on it. A plain close would not do here: closing a connection first shuts it down,
  // which sends a FIN before any RST.
  sockaddr unspecified{};
  unspecified.sa_family = AF_UNSPEC;
  (void)::connect(connection.fd(), &unspecified, sizeof unspecified);
}

Task<RelayResult> relay(TcpConnection& client, TcpConnection& upstream, RelayOptions options,
                        RelayCounters* counters, BufferLease first_to_upstream) {
  // The relay's own deadlines replace the connections' read timeouts; a peer that takes none
  // of its output for the idle time fails it.
  client.set_read_timeout_ms(0);
  upstream.set_read_timeout_ms(0);
  client.set_write_timeout_ms(options.idle_timeout_ms);
  upstream.set_write_timeout_ms(options.idle_timeout_ms);
  Session session(client, upstream, options, counters);
  session.start();
  Join join;
  Direction up = pump(session, kClient, std::move(first_to_upstream));
  Direction down = pump(session, kUpstream, BufferLease{});
  co_await BothDirections{join, up, down};
  co_return session.result;
}

}  // namespace ucp::proxy
