#include "Churn.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpClient.h"

#include "BenchSupport.h"
#include "Pingpong.h"

namespace bench {
namespace {

using namespace std::chrono_literals;
using ucp::EventLoop;
using ucp::Task;

// One load thread on a UCP loop: a coroutine per slot. Each cycle: TcpClient::connect -> write
// the message -> read the echo and verify it -> close with RST -> again at once. RST
// (SO_LINGER 0) leaves no TIME_WAIT socket on either side: at tens of thousands of connections
// a second an orderly close would use up the ephemeral ports within seconds. Reads are
// single-shot (the loop has no receive buffers), so once the echo is in nothing is in flight
// and close() is one operation.
class UcpChurn final : public ChurnThread {
 public:
  UcpChurn(const ChurnOptions& options, ChurnShared& shared, ChurnCounters& counters,
           const PatternTable& pattern, int first, int step)
      : options_(options), shared_(shared), counters_(counters), pattern_(pattern) {
    for (int id = first; id < options.conns; id += step) {
      Slot slot;
      slot.key = splitmix64(static_cast<uint64_t>(id) | (uint64_t{1} << 40));
      slot.id = id;
      slots_.push_back(slot);
    }
  }

  Histogram& histogram() override { return histogram_; }

  void run() override {
    ucp::LoopOptions loop_options;
    loop_options.backend = options_.backend;
    auto loop = EventLoop::create(loop_options);
    if (!loop) {
      std::fprintf(stderr, "bench_client: %s\n",
                   EventLoop::describe_setup_error(loop.error(), loop_options).c_str());
      counters_.connect_errors.fetch_add(slots_.size());
      return;
    }
    loop_ = loop.value().get();
    for (size_t i = 0; i < slots_.size(); ++i) loop_->spawn(cycle(i));
    loop_->spawn(supervise());
    loop_->run();
  }

 private:
  struct Slot {
    int id = 0;
    uint64_t key = 0;    // pattern key: message `cycle` of this slot
    uint64_t cycle = 0;  // connections made by this slot so far
  };

  bool ending() const noexcept {
    return stop_.stop_requested() || shared_.stop.load(std::memory_order_relaxed) ||
           now_ns() >= shared_.end_ns;
  }

  Task<> supervise() {
    while (!shared_.stop.load(std::memory_order_relaxed)) {
      const int64_t left = shared_.end_ns - now_ns();
      if (left <= 0) break;
      co_await ucp::io::sleep_for(*loop_,
                                  std::chrono::nanoseconds(std::min<int64_t>(left, 10'000'000)));
    }
    stop_.request_stop();  // connects and reads in progress end now
    for (int i = 0; i < 5000 && live_ > 0; ++i) co_await ucp::io::sleep_for(*loop_, 1ms);
    loop_->stop();
  }

  Task<> cycle(size_t index) {
    ++live_;
    Slot& slot = slots_[index];
    std::vector<char> buffer(std::max<size_t>(options_.size, 4096));
    ucp::ClientOptions client;
    client.connect_timeout_ms = 0;
    client.stop = stop_.token();
    while (!ending()) {
      const int64_t started = now_ns();
      auto conn = co_await ucp::TcpClient::connect(*loop_, options_.address, client);
      if (!conn) {
        if (conn.error() != std::errc::operation_canceled) {
          fail(slot, counters_.connect_errors, "connect", conn.error());
        }
        ++slot.cycle;
        co_await ucp::io::sleep_for(*loop_, std::chrono::nanoseconds(kChurnRetryBackoffNs));
        continue;
      }
      ucp::set_linger_reset(conn->fd());
      const bool echoed = co_await echo(slot, **conn, buffer);
      co_await conn->close();  // RST: the server's next read ends the connection
      if (echoed) {
        const int64_t now = now_ns();
        if (now >= shared_.record_start_ns && now < shared_.end_ns) {
          histogram_.record(now - started);
          counters_.cycles.fetch_add(1, std::memory_order_relaxed);
        }
        ++slot.cycle;
      } else {
        ++slot.cycle;
        if (!ending()) {
          co_await ucp::io::sleep_for(*loop_, std::chrono::nanoseconds(kChurnRetryBackoffNs));
        }
      }
    }
    --live_;
  }

  /// Sends this cycle's message and verifies its echo; false on any failure (reported).
  Task<bool> echo(Slot& slot, ucp::TcpConnection& conn, std::vector<char>& buffer) {
    const char* message = pattern_.message(slot.key, slot.cycle);
    if (auto sent = co_await conn.write(std::span<const char>(message, options_.size)); !sent) {
      fail(slot, counters_.closed_errors, "send", sent.error());
      co_return false;
    }
    size_t received = 0;
    while (received < options_.size) {
      auto n = co_await ucp::with_stop(conn.read(std::span<char>(buffer)), stop_.token());
      if (!n) {
        if (n.error() != std::errc::operation_canceled) {
          fail(slot, counters_.closed_errors, "recv", n.error());
        }
        co_return false;
      }
      if (*n == 0) {
        fail(slot, counters_.closed_errors, "recv",
             std::make_error_code(std::errc::connection_reset));
        co_return false;
      }
      if (received + *n > options_.size ||
          std::memcmp(message + received, buffer.data(), *n) != 0) {
        report(slot, "verification error: echoed bytes differ from those sent", {});
        counters_.verify_errors.fetch_add(1, std::memory_order_relaxed);
        co_return false;
      }
      received += *n;
    }
    co_return true;
  }

  void fail(const Slot& slot, std::atomic<uint64_t>& counter, const char* what,
            std::error_code error) {
    if (now_ns() < shared_.end_ns && !shared_.stop.load(std::memory_order_relaxed)) {
      counter.fetch_add(1, std::memory_order_relaxed);
      report(slot, what, error);
    }
  }

  void report(const Slot& slot, const char* what, std::error_code error) {
    if (shared_.reported_errors.fetch_add(1) >= kChurnMaxReportedErrors) return;
    std::fprintf(stderr, "bench_client: %s: slot %d connection %" PRIu64 ": %s%s\n",
                 options_.target.c_str(), slot.id, slot.cycle, what,
                 error ? (std::string(" failed: ") + error.message()).c_str() : "");
  }

  const ChurnOptions& options_;
  ChurnShared& shared_;
  ChurnCounters& counters_;
  const PatternTable& pattern_;
  EventLoop* loop_ = nullptr;
  ucp::StopSource stop_;
  std::vector<Slot> slots_;
  Histogram histogram_;
  size_t live_ = 0;
};

}  // namespace

int run_churn(const ChurnOptions& options, const std::atomic<bool>& interrupted) {
  FILE* progress = options.json ? stderr : stdout;
  const PatternTable pattern(options.size);
  const auto thread_count = static_cast<size_t>(std::min(options.threads, options.conns));
  ChurnShared shared;
  std::vector<ChurnCounters> counters(thread_count);
  std::string why;
  if (!ucp_backend_available(options.backend, &why)) {
    std::fprintf(stderr, "bench_client: %s\n", why.c_str());
    return 1;
  }
  std::vector<std::unique_ptr<ChurnThread>> loads;
  for (size_t t = 0; t < thread_count; ++t) {
    const auto first = static_cast<int>(t);
    const auto step = static_cast<int>(thread_count);
    loads.push_back(std::make_unique<UcpChurn>(options, shared, counters[t], pattern, first, step));
  }
  const int64_t begin = now_ns();
  shared.record_start_ns = begin + int64_t{options.warmup_s} * 1'000'000'000;
  shared.end_ns = shared.record_start_ns + static_cast<int64_t>(options.seconds * 1e9);
  std::vector<std::thread> threads;
  for (auto& load : loads) threads.emplace_back([&load] { load->run(); });

  if (options.warmup_s > 0) {
    std::fprintf(progress, "warm-up: %d s\n", options.warmup_s);
    std::fflush(progress);
    while (now_ns() < shared.record_start_ns && !interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const CpuTimes client_before = self_cpu();
  std::optional<CpuTimes> server_before;
  if (!options.server_pids.empty()) server_before = processes_cpu(options.server_pids);
  const int64_t start = now_ns();
  auto sum = [&counters](auto member) {
    uint64_t total = 0;
    for (auto& c : counters) total += (c.*member).load(std::memory_order_relaxed);
    return total;
  };
  uint64_t last_cycles = 0;
  int64_t last_time = start;
  while (!interrupted.load()) {
    const int64_t now = now_ns();
    if (now >= shared.end_ns) break;
    const int64_t next_tick = std::min(last_time + 1'000'000'000, shared.end_ns);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(next_tick - now, 0)));
    const uint64_t cycles = sum(&ChurnCounters::cycles);
    const uint64_t errors = sum(&ChurnCounters::verify_errors) +
                            sum(&ChurnCounters::connect_errors) +
                            sum(&ChurnCounters::closed_errors);
    const int64_t tick_end = now_ns();
    const double dt = static_cast<double>(tick_end - last_time) / 1e9;
    std::fprintf(progress, "[%5.1fs] conn/s %10.0f  errors %" PRIu64 "\n",
                 static_cast<double>(tick_end - start) / 1e9,
                 static_cast<double>(cycles - last_cycles) / dt, errors);
    std::fflush(progress);
    last_cycles = cycles;
    last_time = tick_end;
  }
  shared.stop.store(true);
  for (auto& thread : threads) thread.join();  // each leaves its loop within 10 ms
  const double seconds = static_cast<double>(std::min(now_ns(), shared.end_ns) - start) / 1e9;
  const CpuTimes client_after = self_cpu();
  std::optional<CpuTimes> server_after;
  if (!options.server_pids.empty()) server_after = processes_cpu(options.server_pids);

  Histogram histogram;
  for (auto& load : loads) histogram.merge(load->histogram());
  const uint64_t cycles = sum(&ChurnCounters::cycles);
  const uint64_t verify_errors = sum(&ChurnCounters::verify_errors);
  const uint64_t connect_errors = sum(&ChurnCounters::connect_errors);
  const uint64_t closed_errors = sum(&ChurnCounters::closed_errors);
  const uint64_t errors = verify_errors + connect_errors + closed_errors;
  const double rate = seconds > 0 ? static_cast<double>(cycles) / seconds : 0;
  const double client_cpu = client_after.total() - client_before.total();
  const double client_user = client_after.user_s - client_before.user_s;
  double server_cpu = -1;
  double server_user = -1;
  if (server_before && server_after) {
    server_cpu = server_after->total() - server_before->total();
    server_user = server_after->user_s - server_before->user_s;
  }

  if (options.json) {
    // The pingpong mode's keys, so that scripts read both alike: a request is one connection.
    std::printf(
        "{\"mode\":\"churn\",\"qps\":%.1f,\"conns_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
        "\"p999_us\":%.1f,\"max_us\":%.1f,\"errors\":%" PRIu64 ",\"verify_errors\":%" PRIu64
        ",\"connect_errors\":%" PRIu64 ",\"closed_errors\":%" PRIu64 ",\"requests\":%" PRIu64
        ",\"seconds\":%.3f,\"conns\":%d,\"size\":%zu,\"depth\":1,\"threads\":%zu,"
        "\"ramp_s\":0.000,\"client_cpu_s\":%.3f,\"client_utime_s\":%.3f,\"server_cpu_s\":%.3f,"
        "\"server_utime_s\":%.3f}\n",
        rate, rate, histogram.percentile_us(0.50), histogram.percentile_us(0.99),
        histogram.percentile_us(0.999), histogram.max_us(), errors, verify_errors, connect_errors,
        closed_errors, cycles, seconds, options.conns, options.size, thread_count, client_cpu,
        client_user, server_cpu, server_user);
  } else {
    std::printf("churn: %d connection slots, message %zu B, threads %zu\n", options.conns,
                options.size, thread_count);
    std::printf("connections %" PRIu64 " in %.2f s: %.0f conn/s (each: connect, one echo, close)\n",
                cycles, seconds, rate);
    std::printf("errors %" PRIu64 " (verification %" PRIu64 ", connect %" PRIu64
                ", lost connections %" PRIu64 ")\n",
                errors, verify_errors, connect_errors, closed_errors);
    std::printf("latency us (connect + echo): p50 %.1f  p99 %.1f  p999 %.1f  max %.1f\n",
                histogram.percentile_us(0.50), histogram.percentile_us(0.99),
                histogram.percentile_us(0.999), histogram.max_us());
    bench::print_cpu_summary(seconds, client_cpu, client_user, server_cpu, server_user,
                             static_cast<double>(cycles), "connections");
  }
  return errors == 0 && cycles > 0 ? 0 : 1;
}

}  // namespace bench
