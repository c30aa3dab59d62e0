// The pingpong load thread on UCP: one EventLoop per thread, connections from TcpClient, one
// coroutine per connection. Reads are the loop's multishot receive into its receive buffers
// (receive(): no copy), writes go through the connection's output queue (write(): what every
// connection writes in one loop iteration leaves in one batch).
//
//   supervisor   ramp deadline, the phase changes the main thread makes, the end
//   connectors   kMaxConnectsInFlight coroutines that connect the connections one by one,
//                retrying refusals for kConnectRetryMs, and start a session for each
//   session      one connection: the warm-up echo, then (at the gate) DEPTH messages in flight,
//                each echoed byte verified, each completed message one latency sample and the
//                next message written

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <coroutine>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/TcpClient.h"

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
  }

  Histogram& histogram() override { return histogram_; }

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
    loop_ = loop->get();
    gate_.emplace(*loop_);
    loop_->spawn(supervise());
    loop_->run();  // returns with every connection closed and every frame gone
  }

 private:
  struct Connection {
    uint32_t id = 0;
    uint64_t key = 0;       // pattern key of this connection's stream
    uint64_t sent = 0;      // stream bytes written
    uint64_t received = 0;  // stream bytes echoed back and verified
    uint64_t issued = 0;    // messages issued
    bool failed = false;
  };

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
      for (;;) {
        const int64_t now = now_ns();
        if (now >= shared_.measure_end_ns ||
            shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
          break;
        }
        const auto wait = std::min<int64_t>(shared_.measure_end_ns - now, 100'000'000);
        co_await ucp::io::sleep_for(*loop_, std::chrono::nanoseconds(wait));
      }
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
    // Ramp: one warm-up message, echoed and verified, before the clock starts.
    if (co_await Written{*this, c, conn->write(issue(c, index, now_ns()))} &&
        co_await echo_warm_up(c, *conn)) {
      ++ready_;
      co_await gate_->wait();
      if (measuring_) co_await measure(c, *conn, index);
    }
    co_await conn->close();
    --live_;
  }

  Task<bool> echo_warm_up(Connection& c, TcpConnection& conn) {
    while (c.received < options_.size) {
      auto data = co_await ucp::with_stop(conn.receive(), stop_.token());
      if (!received_ok(c, data)) co_return false;
      if (!verify(c, as_chars(data->bytes()))) co_return false;
      c.received += data->size();
    }
    co_return true;
  }

  Task<> measure(Connection& c, TcpConnection& conn, size_t index) {
    const int64_t start = now_ns();
    for (int d = 0; d < options_.depth; ++d) {
      if (!co_await Written{*this, c, conn.write(issue(c, index, start))}) co_return;
    }
    for (;;) {
      auto data = co_await ucp::with_stop(conn.receive(), stop_.token());
      if (!received_ok(c, data)) co_return;
      if (!verify(c, as_chars(data->bytes()))) co_return;
      const int64_t now = now_ns();
      const uint64_t completed = complete_messages(c, index, data->size(), now);
      data->reset();  // the receive buffer goes back before the writes
      for (uint64_t m = 0; m < completed; ++m) {
        // write() copies into the connection's queue and completes at once (below
        // max_output_bytes); all of this iteration's writes leave in one send.
        if (!co_await Written{*this, c, conn.write(issue(c, index, now))}) co_return;
      }
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

  // Issues message `c.issued`: stamps its start; returns its bytes.
  std::span<const char> issue(Connection& c, size_t index, int64_t now) {
    send_times_[slot(index, c.issued)] = now;
    const char* message = pattern_.message(c.key, c.issued);
    ++c.issued;
    c.sent += options_.size;
    return {message, options_.size};
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

  // Accounts the messages that `bytes` more echoed bytes completed; returns how many to issue.
  uint64_t complete_messages(Connection& c, size_t index, size_t bytes, int64_t now) {
    const uint64_t size = options_.size;
    const uint64_t before = c.received / size;
    c.received += bytes;
    const uint64_t after = c.received / size;
    if (after == before || !measuring_) return 0;
    if (now < shared_.record_start_ns || now >= shared_.measure_end_ns) return after - before;
    for (uint64_t seq = before; seq < after; ++seq) {
      histogram_.record(now - send_times_[slot(index, seq)]);
    }
    counters_.requests.fetch_add(after - before, std::memory_order_relaxed);
    counters_.bytes.fetch_add((after - before) * size, std::memory_order_relaxed);
    return after - before;
  }

  void report_mismatch(Connection& c, uint64_t pos, const char* what) {
    counters_.verify_errors.fetch_add(1);
    if (shared_.reported_mismatches.fetch_add(1) < kMaxReportedMismatches) {
      std::fprintf(stderr,
                   "bench_client: verification error: connection %u message %" PRIu64
                   " byte %" PRIu64 ": %s\n",
                   c.id, pos / options_.size, pos % options_.size, what);
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
  std::vector<int64_t> send_times_;  // [connection][seq % depth]: when the message was issued
  Histogram histogram_;
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
  if ((*loop)->backend_kind() != backend) {
    if (why) *why = std::string("a loop asked for it runs ") + (*loop)->backend_name();
    return false;
  }
  return true;
}

}  // namespace bench
