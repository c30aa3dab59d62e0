// The load thread on UCP: one EventLoop per thread, connections from TcpClient, one coroutine
// per connection. Reads are the loop's multishot receive into its receive buffers (receive():
// no copy), writes go through the connection's output queue (write(): what every connection
// writes in one loop iteration leaves in one batch).
//
//   supervisor   ramp deadline, the phase changes the main thread makes, the end (open loop:
//                after the answers still owed, at most kDrainMs)
//   connectors   kMaxConnectsInFlight coroutines that connect the connections one by one,
//                retrying refusals for kConnectRetryMs, and start a session for each
//   pacer        open loop only: walks the thread's schedule (its connections' due times in
//                order), sleeping on the loop's timer until each, and wakes the connection's
//                session; a session still waiting for an answer finds the request owed when
//                the answer comes
//   session      one connection: the warm-up request, then (at the gate) either DEPTH requests
//                in flight (closed loop: each answer one latency sample and the next request)
//                or the schedule's requests one at a time (open loop: latency from the due
//                time, so a late answer delays the next request and that delay is counted,
//                the coordinated-omission correction of wrk2)
//
// A request is a SIZE-byte echo message (each echoed byte verified) or an HTTP GET (the
// response framed by HttpResponseReader).

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <coroutine>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/TcpClient.h"

#include "HttpResponseReader.h"
#include "Pingpong.h"

namespace bench {
namespace {

using namespace std::chrono_literals;
using ucp::ClientConnection;
using ucp::EventLoop;
using ucp::Task;
using ucp::TcpConnection;

/// Sessions wait here until the measure phase begins (or the run ends).
class Gate {
 public:
  explicit Gate(EventLoop& loop) noexcept : loop_(loop) {}
  void open() {
    open_ = true;
    for (auto waiter : waiters_) loop_.schedule(waiter);
    waiters_.clear();
  }
  auto wait() noexcept {
    struct Awaiter {
      Gate& gate;
      bool await_ready() const noexcept { return gate.open_; }
      void await_suspend(std::coroutine_handle<> caller) { gate.waiters_.push_back(caller); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

 private:
  EventLoop& loop_;
  std::vector<std::coroutine_handle<>> waiters_;
  bool open_ = false;
};

bool transient_connect_error(std::error_code error) {
  return error == std::errc::connection_refused ||
         error == std::errc::resource_unavailable_try_again ||
         error == std::errc::address_not_available || error == std::errc::timed_out ||
         error == std::errc::connection_reset || error == std::errc::interrupted;
}

class UcpPingpong final : public PingpongThread {
 public:
  UcpPingpong(Shared& shared, Counters& counters, const PatternTable& pattern, int first, int step,
              ucp::BackendKind backend)
      : shared_(shared),
        options_(*shared.options),
        counters_(counters),
        pattern_(pattern),
        backend_(backend) {
    for (int id = first; id < options_.conns; id += step) {
      Connection conn;
      conn.id = static_cast<uint32_t>(id);
      conn.key = splitmix64(static_cast<uint64_t>(id));
      connections_.push_back(conn);
    }
    send_times_.assign(connections_.size() * static_cast<size_t>(options_.depth), 0);
    if (http()) {
      request_ = "GET " + options_.http_path + " HTTP/1.1\r\nHost: " + options_.host + ":" +
                 std::to_string(options_.port) + "\r\n\r\n";
    }
    if (options_.rate > 0) ns_per_request_ = 1e9 / options_.rate;
  }

  Histogram& histogram() override { return histogram_; }
  Histogram& pacing() override { return pacing_; }
  RateTally tally() const override { return tally_; }

  void run() override {
    ucp::LoopOptions loop_options;
    loop_options.backend = backend_;
    // Every connection's receive may complete in one batch before buffers go back.
    loop_options.provided_buffers_count = std::bit_ceil(
        static_cast<uint32_t>(std::clamp<size_t>(connections_.size() + 64, 64, 32768)));
    loop_options.provided_buffer_size = std::bit_ceil(static_cast<uint32_t>(
        std::clamp<size_t>(options_.size * static_cast<size_t>(options_.depth), 1024, 16384)));
    auto loop = EventLoop::create(loop_options);
    if (!loop) {
      std::fprintf(stderr, "bench_client: %s\n",
                   EventLoop::describe_setup_error(loop.error(), loop_options).c_str());
      fail_ramp();
      return;
    }
    loop_ = loop.value().get();
    gate_.emplace(*loop_);
    loop_->spawn(supervise());
    loop_->run();  // returns with every connection closed and every frame gone
  }

 private:
  struct Connection {
    uint32_t id = 0;
    uint64_t key = 0;        // pattern key of this connection's stream
    uint64_t sent = 0;       // echo: stream bytes written
    uint64_t received = 0;   // echo: stream bytes echoed back and verified
    uint64_t issued = 0;     // requests written (the warm-up one included)
    uint64_t completed = 0;  // responses complete
    // Open loop.
    uint64_t base = 0;                // requests before the schedule's first (the warm-up)
    uint64_t due = 0;                 // schedule requests the pacer has made due
    int64_t free_since = 0;           // when the previous answer arrived
    std::coroutine_handle<> waiting;  // the session, when it waits for its next due time
    HttpResponseReader http;
    bool failed = false;
  };

  bool http() const noexcept { return !options_.http_path.empty(); }
  bool open_loop() const noexcept { return options_.rate > 0; }

  /// Open loop: when request `k` of the schedule of connection `c` is due.
  int64_t due_ns(const Connection& c, uint64_t k) const noexcept {
    const double slot = static_cast<double>(c.id) + static_cast<double>(k) * options_.conns;
    return shared_.load_start_ns + std::llround(slot * ns_per_request_);
  }
  bool in_interval(int64_t t) const noexcept {
    return t >= shared_.record_start_ns && t < shared_.measure_end_ns;
  }

  void fail_ramp() {
    shared_.ramp_failed.store(true);
    shared_.ramped_threads.fetch_add(1);
  }

  int64_t ramp_budget_ns() const noexcept {
    // 30 s, plus 1 s per 1,000 connections: a slow accept loop is not a failure.
    return (30 + options_.conns / 1000) * int64_t{1'000'000'000};
  }

  Task<> supervise() {
    const int64_t deadline = now_ns() + ramp_budget_ns();
    const size_t connectors = std::min<size_t>(kMaxConnectsInFlight, connections_.size());
    for (size_t i = 0; i < connectors; ++i) loop_->spawn(connector());
    while (ready_ < connections_.size() && !failed_) {
      if (now_ns() > deadline) {
        std::fprintf(stderr, "bench_client: ramp timed out: %zu of %zu connections ready\n", ready_,
                     connections_.size());
        counters_.connect_errors.fetch_add(connections_.size() - ready_);
        failed_ = true;
        break;
      }
      co_await ucp::io::sleep_for(*loop_, 1ms);
    }
    if (failed_) {
      fail_ramp();
    } else {
      shared_.ramped_threads.fetch_add(1);
      while (shared_.phase.load() == Phase::kRamp) co_await ucp::io::sleep_for(*loop_, 1ms);
    }
    if (!failed_ && shared_.phase.load() == Phase::kMeasure) {
      measuring_ = true;
      gate_->open();
      if (open_loop()) loop_->spawn(pace());
      if (options_.busy_poll) loop_->spawn(spin());
      for (;;) {
        const int64_t now = now_ns();
        if (now >= shared_.measure_end_ns ||
            shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
          break;
        }
        const auto wait = std::min<int64_t>(shared_.measure_end_ns - now, 100'000'000);
        co_await ucp::io::sleep_for(*loop_, std::chrono::nanoseconds(wait));
      }
      if (open_loop()) co_await drain();
      measuring_ = false;
    }
    // The end: pending connects and receives are cancelled, sessions close their connections.
    stop_.request_stop();
    gate_->open();
    for (int i = 0; i < 5000 && live_ > 0; ++i) co_await ucp::io::sleep_for(*loop_, 1ms);
    loop_->stop();
  }

  Task<> connector() {
    while (!failed_ && !stop_.stop_requested() && next_ < connections_.size()) {
      const size_t index = next_++;
      ClientConnection conn = co_await connect_with_retry();
      if (!conn) {
        if (!stop_.stop_requested()) failed_ = true;
        co_return;
      }
      counters_.connected.fetch_add(1, std::memory_order_relaxed);
      ++live_;
      loop_->spawn(session(index, std::move(conn)));
    }
  }

  /// A connection, or null (failed and reported, or stopped).
  Task<ClientConnection> connect_with_retry() {
    const int64_t first_try = now_ns();
    ucp::ClientOptions client;
    client.connect_timeout_ms = 0;  // the ramp deadline bounds it
    client.stop = stop_.token();
    client.tls = shared_.tls;
    for (;;) {
      auto conn = co_await ucp::TcpClient::connect(*loop_, shared_.address, client);
      if (conn) co_return std::move(*conn);
      if (conn.error() == std::errc::operation_canceled) co_return ClientConnection();
      if (transient_connect_error(conn.error()) &&
          (now_ns() - first_try) / 1'000'000 < kConnectRetryMs) {
        co_await ucp::io::sleep_for(*loop_, std::chrono::milliseconds(kRetryBackoffMs));
        continue;
      }
      std::fprintf(stderr, "bench_client: connect to %s:%u failed: %s\n", options_.host.c_str(),
                   options_.port, conn.error().message().c_str());
      counters_.connect_errors.fetch_add(1);
      co_return ClientConnection();
    }
  }

  Task<> session(size_t index, ClientConnection conn) {
    Connection& c = connections_[index];
    // Ramp: one warm-up request, answered (and verified), before the clock starts.
    if (co_await Written{*this, c, conn->write(issue(c, index, now_ns()))} &&
        co_await answered(c, *conn)) {
      ++ready_;
      co_await gate_->wait();
      if (measuring_) {
        if (open_loop()) {
          co_await measure_open(c, *conn, index);
        } else {
          co_await measure_closed(c, *conn, index);
        }
      }
    }
    co_await conn->close();
    --live_;
  }

  /// Receives until every request written is answered; false when the connection failed
  /// (reported) or the run ended.
  Task<bool> answered(Connection& c, TcpConnection& conn) {
    while (c.completed < c.issued) {
      auto data = co_await ucp::with_stop(conn.receive(), stop_.token());
      if (!received_ok(c, data) || !consume(c, as_chars(data->bytes()))) co_return false;
    }
    co_return true;
  }

  Task<> measure_closed(Connection& c, TcpConnection& conn, size_t index) {
    const int64_t start = now_ns();
    for (int d = 0; d < options_.depth; ++d) {
      if (!co_await Written{*this, c, conn.write(issue(c, index, start))}) co_return;
    }
    for (;;) {
      auto data = co_await ucp::with_stop(conn.receive(), stop_.token());
      if (!received_ok(c, data)) co_return;
      const uint64_t before = c.completed;
      if (!consume(c, as_chars(data->bytes()))) co_return;
      const int64_t now = now_ns();
      const size_t bytes = data->size();
      data->reset();  // the receive buffer goes back before the writes
      const uint64_t completed = c.completed - before;
      if (completed == 0) continue;
      if (!measuring_) co_return;
      if (in_interval(now)) {
        for (uint64_t seq = before; seq < c.completed; ++seq) {
          histogram_.record(now - send_times_[slot(index, seq)]);
        }
        counters_.requests.fetch_add(completed, std::memory_order_relaxed);
        counters_.bytes.fetch_add(bytes, std::memory_order_relaxed);
      }
      for (uint64_t m = 0; m < completed; ++m) {
        // write() copies into the connection's queue and completes at once (below
        // max_output_bytes); all of this iteration's writes leave in one send.
        if (!co_await Written{*this, c, conn.write(issue(c, index, now))}) co_return;
      }
    }
  }

  /// Open loop: the schedule's requests, one in flight, each as soon as it is due and the
  /// previous one is answered; latency from the due time.
  Task<> measure_open(Connection& c, TcpConnection& conn, size_t index) {
    c.base = c.issued;
    for (;;) {
      if (c.issued - c.base == c.due) {
        if (schedule_done_) co_return;
        co_await Due{c};
        continue;
      }
      const int64_t due = due_ns(c, c.issued - c.base);
      // The client's own delay: from when it could have written (due, and the connection
      // free) to when it did.
      if (in_interval(due)) pacing_.record(now_ns() - std::max(due, c.free_since));
      if (!co_await Written{*this, c, conn.write(issue(c, index, due))}) co_return;
      const uint64_t received_before = c.received;
      if (!co_await answered(c, conn) || !measuring_) co_return;  // after drain(): counted there
      const int64_t now = now_ns();
      c.free_since = now;
      if (in_interval(due)) {
        histogram_.record(now - due);
        ++tally_.completed;
      }
      if (in_interval(now)) {
        ++tally_.answered_in_interval;
        counters_.requests.fetch_add(1, std::memory_order_relaxed);
        counters_.bytes.fetch_add(http() ? 0 : c.received - received_before,
                                  std::memory_order_relaxed);
      }
    }
  }

  /// Suspends a session until the pacer makes its next request due (or the schedule ends).
  struct Due {
    Connection& c;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> caller) noexcept { c.waiting = caller; }
    void await_resume() const noexcept {}
  };

  void wake(Connection& c) {
    if (c.waiting) loop_->schedule(std::exchange(c.waiting, {}));
  }

  /// --busy-poll: keeps the loop from sleeping. Each pass is one loop iteration whose poll
  /// does not block (a timer due now), so answers and due times are seen within an iteration
  /// rather than after a wake-up.
  Task<> spin() {
    while (!stop_.stop_requested()) {
      co_await ucp::io::sleep_for(*loop_, std::chrono::nanoseconds(0));
    }
  }

  /// Open loop: makes each request of this thread's schedule due at its time, in order.
  Task<> pace() {
    const size_t n = connections_.size();
    uint64_t k = 0;
    size_t i = 0;
    while (!schedule_done_) {
      Connection& c = connections_[i];
      const int64_t due = due_ns(c, k);
      if (due >= shared_.measure_end_ns ||
          shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
        break;
      }
      if (due > now_ns()) {
        co_await ucp::io::sleep_until(
            *loop_, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(due)));
      }
      ++c.due;
      if (in_interval(due)) ++tally_.scheduled;
      wake(c);
      if (++i == n) {
        i = 0;
        ++k;
      }
    }
    schedule_done_ = true;
    for (Connection& each : connections_) wake(each);
  }

  /// Open loop, after the schedule: waits (at most kDrainMs) for the answers still owed, then
  /// counts the requests of the interval left unanswered, each recorded at the latency it has
  /// at least (from its due time to now), so that a stalled server cannot look fast.
  Task<> drain() {
    const int64_t deadline = shared_.measure_end_ns + kDrainMs * 1'000'000;
    auto owed = [this] {
      for (const Connection& c : connections_) {
        if (!c.failed && c.completed - c.base < c.due) return true;
      }
      return false;
    };
    while (!schedule_done_ || owed()) {
      if (now_ns() >= deadline || shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
        break;
      }
      co_await ucp::io::sleep_for(*loop_, 1ms);
    }
    schedule_done_ = true;
    const int64_t now = now_ns();
    for (Connection& c : connections_) {
      if (c.base == 0) continue;  // never reached the schedule
      for (uint64_t k = c.completed - c.base; k < c.due; ++k) {
        const int64_t due = due_ns(c, k);
        if (!in_interval(due)) continue;
        ++tally_.unanswered;
        histogram_.record(now - due);
      }
      wake(c);
    }
  }

  /// Awaits one write, counting the connection as lost when it failed (no coroutine frame
  /// per message: this is the hot path).
  struct Written {
    UcpPingpong& self;
    Connection& c;
    TcpConnection::WriteAwaiter write;
    bool await_ready() noexcept { return write.await_ready(); }
    void await_suspend(std::coroutine_handle<> caller) noexcept { write.await_suspend(caller); }
    bool await_resume() {
      auto result = write.await_resume();
      if (!result) self.lose(c, result.error().message().c_str());
      return static_cast<bool>(result);
    }
  };
  static std::span<const char> as_chars(std::span<const std::byte> bytes) noexcept {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

  /// False (and the connection counted as lost) unless `data` holds bytes; a cancel (the end
  /// of the run) is no loss.
  bool received_ok(Connection& c, const ucp::Result<ucp::BufferLease>& data) {
    if (!data) {
      if (data.error() != std::errc::operation_canceled) lose(c, data.error().message().c_str());
      return false;
    }
    if (data->empty()) {
      lose(c, "closed by the server");
      return false;
    }
    return true;
  }

  // Issues request `c.issued`: stamps its start; returns its bytes.
  std::span<const char> issue(Connection& c, size_t index, int64_t now) {
    send_times_[slot(index, c.issued)] = now;
    if (http()) {
      ++c.issued;
      return {request_.data(), request_.size()};
    }
    const char* message = pattern_.message(c.key, c.issued);
    ++c.issued;
    c.sent += options_.size;
    return {message, options_.size};
  }

  // Accounts received bytes: echo bytes verified, HTTP responses framed; c.completed counts
  // the requests they answer. False (and reported) when they are wrong.
  bool consume(Connection& c, std::span<const char> bytes) {
    if (http()) {
      const HttpResponseReader::Progress progress = c.http.feed(bytes);
      if (progress.error != nullptr) {
        report_mismatch(c, c.completed, progress.error);
        return false;
      }
      if (progress.unsuccessful > 0) {
        counters_.http_errors.fetch_add(progress.unsuccessful, std::memory_order_relaxed);
      }
      c.completed += progress.responses;
      if (c.completed > c.issued) {
        report_mismatch(c, c.completed, "more responses than requests");
        return false;
      }
      return true;
    }
    if (!verify(c, bytes)) return false;
    c.received += bytes.size();
    c.completed = c.received / options_.size;
    return true;
  }

  size_t slot(size_t index, uint64_t seq) const noexcept {
    return index * static_cast<size_t>(options_.depth) +
           static_cast<size_t>(seq % static_cast<uint64_t>(options_.depth));
  }

  // Compares echoed bytes [received, received + got.size()) with what was sent, per message.
  bool verify(Connection& c, std::span<const char> got) {
    if (c.received + got.size() > c.sent) {
      report_mismatch(c, c.sent, "more bytes echoed than sent");
      return false;
    }
    const uint64_t size = options_.size;
    uint64_t pos = c.received;
    size_t done = 0;
    while (done < got.size()) {
      const uint64_t offset = pos % size;
      const size_t length =
          static_cast<size_t>(std::min<uint64_t>(size - offset, got.size() - done));
      const char* expected = pattern_.message(c.key, pos / size) + offset;
      if (std::memcmp(expected, got.data() + done, length) != 0) {
        size_t at = 0;
        while (expected[at] == got[done + at]) ++at;
        char what[64];
        std::snprintf(what, sizeof what, "expected 0x%02x, got 0x%02x",
                      static_cast<unsigned char>(expected[at]),
                      static_cast<unsigned char>(got[done + at]));
        report_mismatch(c, pos + at, what);
        return false;
      }
      pos += length;
      done += length;
    }
    return true;
  }

  // `pos`: echo, the stream byte; HTTP, the response.
  void report_mismatch(Connection& c, uint64_t pos, const char* what) {
    counters_.verify_errors.fetch_add(1);
    if (shared_.reported_mismatches.fetch_add(1) < kMaxReportedMismatches) {
      if (http()) {
        std::fprintf(stderr, "bench_client: connection %u response %" PRIu64 ": %s\n", c.id, pos,
                     what);
      } else {
        std::fprintf(stderr,
                     "bench_client: verification error: connection %u message %" PRIu64
                     " byte %" PRIu64 ": %s\n",
                     c.id, pos / options_.size, pos % options_.size, what);
      }
    }
    fail(c);
  }

  void lose(Connection& c, const char* why) {
    counters_.closed_errors.fetch_add(1);
    std::fprintf(stderr, "bench_client: connection %u lost: %s\n", c.id, why);
    fail(c);
  }

  void fail(Connection& c) {
    if (c.failed) return;
    c.failed = true;
    counters_.connected.fetch_sub(1, std::memory_order_relaxed);
    if (!measuring_) failed_ = true;  // ends a ramp at once; a measurement carries on
  }

  Shared& shared_;
  const Options& options_;
  Counters& counters_;
  const PatternTable& pattern_;
  ucp::BackendKind backend_;
  EventLoop* loop_ = nullptr;
  std::optional<Gate> gate_;
  ucp::StopSource stop_;  // the end of the run: connects and receives are cancelled
  std::vector<Connection> connections_;
  std::vector<int64_t> send_times_;  // [connection][seq % depth]: when the request was issued
  std::string request_;              // HTTP mode: the GET every request sends
  double ns_per_request_ = 0;        // open loop: the schedule's spacing over all connections
  Histogram histogram_;
  Histogram pacing_;
  RateTally tally_;
  bool schedule_done_ = false;
  size_t next_ = 0;   // next connection to connect
  size_t ready_ = 0;  // connections whose warm-up echo came back
  size_t live_ = 0;   // sessions not yet finished
  bool measuring_ = false;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<PingpongThread> make_ucp_pingpong(Shared& shared, Counters& counters,
                                                  const PatternTable& pattern, int first, int step,
                                                  ucp::BackendKind backend) {
  return std::make_unique<UcpPingpong>(shared, counters, pattern, first, step, backend);
}

bool ucp_backend_available(ucp::BackendKind backend, std::string* why) {
  ucp::LoopOptions options;
  options.backend = backend;
  options.ring_entries = 64;
  auto loop = EventLoop::create(options);
  if (!loop) {
    if (why) *why = EventLoop::describe_setup_error(loop.error(), options);
    return false;
  }
  if (loop->backend_kind() != backend) {
    if (why) *why = std::string("a loop asked for it runs ") + loop->backend_name();
    return false;
  }
  return true;
}

}  // namespace bench
