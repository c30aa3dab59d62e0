// asio_timers: Boost.Asio's steady_timer, for the timer comparison (scripts/bench-timers.sh).
//
//   asio_timers MODE [-n TIMERS] [-s SPREAD_MS]
//     callback   one steady_timer per timer, async_wait with a callback
//     coroutine  one co_spawned coroutine per timer awaiting its steady_timer
//
// Same measurement and output line as bench/timers/ucp_timers.cpp. Links no UCP library.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/resource.h>

namespace {

namespace asio = boost::asio;
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

asio::awaitable<void> sleeper(asio::steady_timer& timer, size_t& fired) {
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  ++fired;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: asio_timers callback|coroutine [-n TIMERS] [-s SPREAD_MS]\n");
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
  if (mode != "callback" && mode != "coroutine") {
    std::fprintf(stderr, "asio_timers: unknown mode %s\n", argv[1]);
    return 2;
  }
  asio::io_context context(1);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<long> offset_us(0, spread_ms * 1000);
  size_t fired = 0;
  std::vector<std::unique_ptr<asio::steady_timer>> timers;
  timers.reserve(total);

  const long rss_before = rss_kb();
  const double cpu_before = cpu_seconds();
  const auto wall_before = Clock::now();
  for (size_t i = 0; i < total; ++i) {
    timers.push_back(std::make_unique<asio::steady_timer>(
        context, wall_before + std::chrono::microseconds(offset_us(rng))));
    if (mode == "callback") {
      timers.back()->async_wait([&fired](boost::system::error_code) { ++fired; });
    } else {
      asio::co_spawn(context, sleeper(*timers.back(), fired), asio::detached);
    }
  }
  const long rss_armed = rss_kb();
  context.run();
  const double cpu = cpu_seconds() - cpu_before;
  const double wall = std::chrono::duration<double>(Clock::now() - wall_before).count();
  std::printf(
      "mode=asio-%s timers=%zu fired=%zu cpu_s=%.4f wall_s=%.4f ns_per_timer=%.1f "
      "bytes_per_pending_timer=%.1f\n",
      argv[1], total, fired, cpu, wall, cpu * 1e9 / double(total),
      double(rss_armed - rss_before) * 1024.0 / double(total));
  return fired == total ? 0 : 1;
}
