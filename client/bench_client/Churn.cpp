#include "Churn.h"

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "ucp/base/UniqueFd.h"

#include "BenchSupport.h"

namespace bench {
namespace {

using ucp::UniqueFd;

constexpr int kMaxEvents = 1024;
constexpr int64_t kRetryBackoffNs = 10'000'000;  // after a failed connect: do not spin
constexpr int kMaxReportedErrors = 10;           // errors printed in full

/// What the main thread sets before the load threads start, and the stop flag.
struct ChurnShared {
  int64_t record_start_ns = 0;  // end of the warm-up: cycles finished before are not counted
  int64_t end_ns = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> reported_errors{0};
};

/// Counters one load thread writes and the main thread reads once per second.
struct alignas(64) ChurnCounters {
  std::atomic<uint64_t> cycles{0};  // connect + echo + close, verified, in the measure phase
  std::atomic<uint64_t> verify_errors{0};
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> closed_errors{0};  // reset or closed by the server before the echo
};

// One load thread: an edge-triggered epoll loop over slots first, first + step, ... Each slot
// cycles: socket + connect -> (EPOLLOUT) send the message -> (EPOLLIN) verify the echo ->
// close with RST -> start again at once. RST (SO_LINGER 0) leaves no TIME_WAIT socket on
// either side: at tens of thousands of connections a second an orderly close would use up
// the ephemeral ports within seconds.
class ChurnThread {
 public:
  ChurnThread(const ChurnOptions& options, ChurnShared& shared, ChurnCounters& counters,
              const PatternTable& pattern, int first, int step)
      : options_(options), shared_(shared), counters_(counters), pattern_(pattern) {
    for (int id = first; id < options.conns; id += step) {
      Slot slot;
      slot.key = splitmix64(static_cast<uint64_t>(id) | (uint64_t{1} << 40));
      slot.id = id;
      slots_.push_back(std::move(slot));
    }
    scratch_.resize(std::max<size_t>(options.size, 4096));
  }

  Histogram& histogram() noexcept { return histogram_; }

  void run() {
    epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) {
      std::perror("bench_client: epoll_create1");
      counters_.connect_errors.fetch_add(slots_.size());
      return;
    }
    int64_t now = now_ns();
    for (size_t i = 0; i < slots_.size(); ++i) start(i, now);
    std::vector<epoll_event> events(kMaxEvents);
    while (!shared_.stop.load(std::memory_order_relaxed)) {
      now = now_ns();
      if (now >= shared_.end_ns) break;
      retry_due(now);
      const int n = epoll_wait(epoll_.get(), events.data(), kMaxEvents, 10);
      if (n < 0 && errno != EINTR) {
        std::perror("bench_client: epoll_wait");
        break;
      }
      for (int e = 0; e < n; ++e) {
        on_event(static_cast<size_t>(events[static_cast<size_t>(e)].data.u64),
                 events[static_cast<size_t>(e)].events);
      }
    }
    for (auto& slot : slots_) slot.fd.reset();  // SO_LINGER 0: RST, nothing lingers
  }

 private:
  enum class State : uint8_t { kConnecting, kEchoing, kWaitingRetry };
  struct Slot {
    UniqueFd fd;
    int id = 0;
    uint64_t key = 0;    // pattern key: message `cycle` of this slot
    uint64_t cycle = 0;  // connections made by this slot so far
    State state = State::kWaitingRetry;
    int64_t started_ns = 0;  // before socket(): the latency covers connect and echo
    int64_t retry_at_ns = 0;
    size_t sent = 0;
    size_t received = 0;
  };

  const char* message(const Slot& slot) const noexcept {
    return pattern_.message(slot.key, slot.cycle);
  }

  void start(size_t index, int64_t now) {
    Slot& slot = slots_[index];
    slot.started_ns = now;
    slot.sent = 0;
    slot.received = 0;
    slot.fd = UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!slot.fd) {
      fail(index, counters_.connect_errors, "socket", errno);
      return;
    }
    const int one = 1;
    setsockopt(slot.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const linger reset_on_close{1, 0};
    setsockopt(slot.fd.get(), SOL_SOCKET, SO_LINGER, &reset_on_close, sizeof reset_on_close);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT | EPOLLET;  // one epoll_ctl per connection
    event.data.u64 = index;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, slot.fd.get(), &event) != 0) {
      fail(index, counters_.connect_errors, "epoll_ctl", errno);
      return;
    }
    const auto* address = reinterpret_cast<const sockaddr*>(&options_.address);
    if (connect(slot.fd.get(), address, sizeof options_.address) == 0) {
      slot.state = State::kEchoing;
      send_rest(index);
    } else if (errno == EINPROGRESS) {
      slot.state = State::kConnecting;
    } else {
      fail(index, counters_.connect_errors, "connect", errno);
    }
  }

  void on_event(size_t index, uint32_t events) {
    Slot& slot = slots_[index];
    if (slot.state == State::kConnecting) {
      int error = 0;
      socklen_t length = sizeof error;
      if (getsockopt(slot.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) {
        fail(index, counters_.connect_errors, "connect", error);
        return;
      }
      if ((events & (EPOLLOUT | EPOLLIN)) == 0) return;
      slot.state = State::kEchoing;
      if (!send_rest(index)) return;
    }
    if (slot.state != State::kEchoing) return;
    if ((events & EPOLLOUT) != 0 && !send_rest(index)) return;
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) receive(index);
  }

  // Sends what is left of the message; false if the slot failed.
  bool send_rest(size_t index) {
    Slot& slot = slots_[index];
    while (slot.sent < options_.size) {
      const ssize_t n =
          send(slot.fd.get(), message(slot) + slot.sent, options_.size - slot.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return true;  // edge-triggered: EPOLLOUT comes with room
        fail(index, counters_.closed_errors, "send", errno);
        return false;
      }
      slot.sent += static_cast<size_t>(n);
    }
    return true;
  }

  void receive(size_t index) {
    Slot& slot = slots_[index];
    for (;;) {  // edge-triggered: read until EAGAIN
      const ssize_t n = recv(slot.fd.get(), scratch_.data(), scratch_.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;
        fail(index, counters_.closed_errors, "recv", errno);
        return;
      }
      if (n == 0) {
        fail(index, counters_.closed_errors, "recv", ECONNRESET);
        return;
      }
      const auto got = static_cast<size_t>(n);
      if (slot.received + got > slot.sent ||
          std::memcmp(message(slot) + slot.received, scratch_.data(), got) != 0) {
        report(slot, "verification error: echoed bytes differ from those sent", 0);
        counters_.verify_errors.fetch_add(1, std::memory_order_relaxed);
        restart_later(index);
        return;
      }
      slot.received += got;
      if (slot.received == options_.size) {
        finish(index);
        return;
      }
    }
  }

  void finish(size_t index) {
    Slot& slot = slots_[index];
    const int64_t now = now_ns();
    if (now >= shared_.record_start_ns) {
      histogram_.record(now - slot.started_ns);
      counters_.cycles.fetch_add(1, std::memory_order_relaxed);
    }
    slot.fd.reset();  // RST: the server's next read ends the connection
    ++slot.cycle;
    start(index, now);
  }

  void fail(size_t index, std::atomic<uint64_t>& counter, const char* what, int error) {
    Slot& slot = slots_[index];
    if (now_ns() < shared_.end_ns && !shared_.stop.load(std::memory_order_relaxed)) {
      counter.fetch_add(1, std::memory_order_relaxed);
      report(slot, what, error);
    }
    restart_later(index);
  }

  void restart_later(size_t index) {
    Slot& slot = slots_[index];
    slot.fd.reset();
    ++slot.cycle;
    slot.state = State::kWaitingRetry;
    slot.retry_at_ns = now_ns() + kRetryBackoffNs;
    retries_.push_back(index);
  }

  void retry_due(int64_t now) {
    size_t kept = 0;
    for (size_t index : retries_) {
      if (slots_[index].retry_at_ns <= now) {
        start(index, now);
      } else {
        retries_[kept++] = index;
      }
    }
    retries_.resize(kept);
  }

  void report(const Slot& slot, const char* what, int error) {
    if (shared_.reported_errors.fetch_add(1) >= kMaxReportedErrors) return;
    std::fprintf(stderr, "bench_client: %s: slot %d connection %" PRIu64 ": %s%s\n",
                 options_.target.c_str(), slot.id, slot.cycle, what,
                 error != 0 ? (std::string(" failed: ") + std::strerror(error)).c_str() : "");
  }

  const ChurnOptions& options_;
  ChurnShared& shared_;
  ChurnCounters& counters_;
  const PatternTable& pattern_;
  UniqueFd epoll_;
  std::vector<Slot> slots_;
  std::vector<size_t> retries_;
  std::vector<char> scratch_;
  Histogram histogram_;
};

}  // namespace

int run_churn(const ChurnOptions& options, const std::atomic<bool>& interrupted) {
  FILE* progress = options.json ? stderr : stdout;
  const PatternTable pattern(options.size);
  const auto thread_count = static_cast<size_t>(std::min(options.threads, options.conns));
  ChurnShared shared;
  std::vector<ChurnCounters> counters(thread_count);
  std::vector<std::unique_ptr<ChurnThread>> loads;
  for (size_t t = 0; t < thread_count; ++t) {
    loads.push_back(std::make_unique<ChurnThread>(options, shared, counters[t], pattern,
                                                  static_cast<int>(t),
                                                  static_cast<int>(thread_count)));
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
  if (options.server_pid != 0) server_before = process_cpu(options.server_pid);
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
  if (options.server_pid != 0) server_after = process_cpu(options.server_pid);

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
