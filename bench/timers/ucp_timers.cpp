// ucp_timers: the cost of UCP's loop timers, for the timer comparison (scripts/bench-timers.sh).
//
//   ucp_timers MODE [-n TIMERS] [-s SPREAD_MS]
//     callback   intrusive TimerNodes on the loop's heap, each firing a callback
//     coroutine  one coroutine per timer, each awaiting io::sleep_for
//
// Arms TIMERS timers due uniformly over SPREAD_MS from now, runs the loop until all fired, and
// prints one line: mode, timers, CPU seconds of the process (user+system), wall seconds, CPU
// nanoseconds per timer, and resident bytes per pending timer (RSS growth while all are armed).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include <sys/resource.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](timeval t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

long rss_kb() {
  long kb = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) == 2) kb = resident * 4;
    std::fclose(f);
  }
  return kb;
}

struct Counted : ucp::TimerNode {
  Counted() : TimerNode(&fire) {}
  static void fire(ucp::TimerNode& node) noexcept {
    auto& self = static_cast<Counted&>(node);
    if (++*self.fired == self.total) self.loop->stop();
  }
  size_t* fired = nullptr;
  size_t total = 0;
  ucp::EventLoop* loop = nullptr;
};

ucp::Task<> sleeper(ucp::EventLoop& loop, Clock::time_point due, size_t& fired, size_t total) {
  (void)co_await ucp::io::sleep_until(loop, due);
  if (++fired == total) loop.stop();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ucp_timers callback|coroutine [-n TIMERS] [-s SPREAD_MS]\n");
    return 2;
  }
  std::string_view mode = argv[1];
  size_t total = 1'000'000;
  long spread_ms = 100;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    if (flag == "-n") total = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "-s") spread_ms = std::strtol(argv[i + 1], nullptr, 10);
  }
  ucp::LoopOptions options;
  options.ring_entries = 256;
  auto created = ucp::EventLoop::create(options);
  if (!created) {
    std::fprintf(stderr, "ucp_timers: %s\n",
                 ucp::EventLoop::describe_setup_error(created.error(), options).c_str());
    return 1;
  }
  ucp::EventLoop& loop = **created;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<long> offset_us(0, spread_ms * 1000);
  size_t fired = 0;
  std::vector<Counted> nodes;
  if (mode == "callback") nodes = std::vector<Counted>(total);

  const long rss_before = rss_kb();
  const double cpu_before = cpu_seconds();
  const auto wall_before = Clock::now();
  for (size_t i = 0; i < total; ++i) {
    const auto due = wall_before + std::chrono::microseconds(offset_us(rng));
    if (mode == "callback") {
      Counted& node = nodes[i];
      node.fired = &fired;
      node.total = total;
      node.loop = &loop;
      loop.add_timer(node, due);
    } else if (mode == "coroutine") {
      loop.spawn(sleeper(loop, due, fired, total));
    } else {
      std::fprintf(stderr, "ucp_timers: unknown mode %s\n", argv[1]);
      return 2;
    }
  }
  const long rss_armed = rss_kb();
  loop.run();
  const double cpu = cpu_seconds() - cpu_before;
  const double wall = std::chrono::duration<double>(Clock::now() - wall_before).count();
  std::printf(
      "mode=ucp-%s timers=%zu fired=%zu cpu_s=%.4f wall_s=%.4f ns_per_timer=%.1f "
      "bytes_per_pending_timer=%.1f\n",
      argv[1], total, fired, cpu, wall, cpu * 1e9 / double(total),
      double(rss_armed - rss_before) * 1024.0 / double(total));
  return fired == total ? 0 : 1;
}
