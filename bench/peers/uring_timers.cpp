// uring_timers: one IORING_OP_TIMEOUT per timer on a bare liburing ring — the design UCP's
// loop timers were measured against (scripts/bench-timers.sh). Links no UCP library.
//
//   uring_timers [-n TIMERS] [-s SPREAD_MS]
//
// Arms TIMERS relative timeouts spread uniformly over SPREAD_MS (the SQE's timespec must live
// until submission: one per timer), submits them an SQ-full at a time, and reaps every CQE in
// batches. Same output line as bench/timers/ucp_timers.cpp.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

#include <liburing.h>
#include <sys/resource.h>

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

}  // namespace

int main(int argc, char** argv) {
  size_t total = 1'000'000;
  long spread_ms = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    if (flag == "-n") total = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "-s") spread_ms = std::strtol(argv[i + 1], nullptr, 10);
  }
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  params.cq_entries = 65536;
  if (int ret = io_uring_queue_init_params(4096, &ring, &params); ret < 0) {
    std::fprintf(stderr, "uring_timers: io_uring_queue_init: %d\n", ret);
    return 1;
  }
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<long> offset_us(0, spread_ms * 1000);
  std::vector<__kernel_timespec> specs(total);

  const long rss_before = rss_kb();
  const double cpu_before = cpu_seconds();
  const auto wall_before = Clock::now();
  size_t fired = 0, queued = 0;
  for (size_t i = 0; i < total; ++i) {
    const long us = offset_us(rng);
    specs[i] = {us / 1000000, (us % 1000000) * 1000};
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
      io_uring_submit(&ring);
      sqe = io_uring_get_sqe(&ring);
    }
    io_uring_prep_timeout(sqe, &specs[i], 0, 0);
    io_uring_sqe_set_data64(sqe, i);
    ++queued;
  }
  io_uring_submit(&ring);
  const long rss_armed = rss_kb();
  while (fired < queued) {
    io_uring_cqe* cqe;
    if (io_uring_wait_cqe(&ring, &cqe) < 0) break;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) { ++seen; }
    io_uring_cq_advance(&ring, seen);
    fired += seen;
  }
  const double cpu = cpu_seconds() - cpu_before;
  const double wall = std::chrono::duration<double>(Clock::now() - wall_before).count();
  std::printf(
      "mode=uring-timeout-op timers=%zu fired=%zu cpu_s=%.4f wall_s=%.4f ns_per_timer=%.1f "
      "bytes_per_pending_timer=%.1f\n",
      total, fired, cpu, wall, cpu * 1e9 / double(total),
      double(rss_armed - rss_before) * 1024.0 / double(total));
  io_uring_queue_exit(&ring);
  return fired == total ? 0 : 1;
}
