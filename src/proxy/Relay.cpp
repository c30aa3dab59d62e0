#include "ucp/proxy/Relay.h"

#include <chrono>

#include <sys/socket.h>

#include "ucp/coro/WhenAll.h"
#include "ucp/io/Timer.h"
#include "ucp/net/Socket.h"

namespace ucp::proxy {
namespace {

constexpr int kClient = 0;
constexpr int kUpstream = 1;

// The state both directions share; it lives in relay()'s frame.
struct Session {
  struct Deadline : io::TimerNode {
    Session* session = nullptr;
  };

  Session(TcpConnection& client, TcpConnection& upstream, RelayOptions o, RelayCounters* c) noexcept
      : side{&client, &upstream}, options(o), counters(c) {
    deadline.session = this;
    deadline.set_callback(&on_deadline);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { loop().cancel_timer(deadline); }

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
    if (due != Clock::time_point::max()) loop().add_timer(deadline, std::max(due, now));
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

  static void on_deadline(io::TimerNode& node) noexcept {
    Session& s = *static_cast<Deadline&>(node).session;
    const Clock::time_point now = s.loop().now();
    if (now >= s.total_due) {
      s.stop(RelayEnd::kTotalTimeout);
    } else if (s.options.idle_timeout_ms != 0 &&
               now >= s.last_activity + std::chrono::milliseconds(s.options.idle_timeout_ms)) {
      s.stop(RelayEnd::kIdleTimeout);
    } else {
      s.arm(now);
    }
  }

  // Ends both directions: their reads end with operation_canceled and a write waiting for a
  // slow peer is withdrawn. Only schedules the directions (timer callbacks must not resume).
  void stop(RelayEnd why, std::error_code error = {}) noexcept {
    if (ended) return;
    ended = true;
    result.end = why;
    result.error = error;
    loop().cancel_timer(deadline);
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

  TcpConnection* side[2];
  RelayOptions options;
  RelayCounters* counters;
  StreamWriter::WriteAwaiter* writing[2] = {nullptr, nullptr};  // by direction
  Deadline deadline;
  Clock::time_point last_activity{};
  Clock::time_point total_due = Clock::time_point::max();
  RelayResult result;
  bool ended = false;
};

// One direction: bytes from side `direction` to the other side, in the buffers the loop lends.
Task<> pump(Session& s, int direction, io::BufferLease lease) {
  TcpConnection& from = *s.side[direction];
  TcpConnection& to = *s.side[1 - direction];
  for (;;) {
    if (lease.empty()) {
      auto received = co_await from.receive_into(lease);
      if (!received) {
        s.failed(direction, received.error(), false);
        co_return;
      }
      if (*received == 0) {  // FIN: pass it on; the other direction goes on
        if (!s.ended) to.shutdown_write();
        co_return;
      }
    }
    if (s.ended) co_return;
    const size_t n = lease.size();
    auto write = to.write_all(lease.bytes());
    s.writing[direction] = &write;
    auto sent = co_await write;
    s.writing[direction] = nullptr;
    lease.reset();  // the buffer goes back to the loop: its bytes are in the kernel
    if (!sent) {
      s.failed(1 - direction, sent.error(), true);
      co_return;
    }
    s.moved(direction, n);
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
                        RelayCounters* counters, io::BufferLease first_to_upstream) {
  // The relay's own deadlines replace the connections' read timeouts; a peer that takes none
  // of its output for the idle time fails it.
  client.set_read_timeout_ms(0);
  upstream.set_read_timeout_ms(0);
  client.set_write_timeout_ms(options.idle_timeout_ms);
  upstream.set_write_timeout_ms(options.idle_timeout_ms);
  Session session(client, upstream, options, counters);
  session.start();
  co_await when_all(pump(session, kClient, std::move(first_to_upstream)),
                    pump(session, kUpstream, io::BufferLease{}));
  co_return session.result;
}

}  // namespace ucp::proxy
