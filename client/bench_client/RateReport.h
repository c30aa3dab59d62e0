#pragma once
// The report of an open-loop (--rate) run: text or one JSON line, and the verdict on whether
// the schedule was kept.

#include <cstdint>

#include "Pingpong.h"

namespace bench {

struct RateResults {
  const Histogram* latency = nullptr;  // from each request's due time
  const Histogram* pacing = nullptr;   // the client's own delay before each send
  RateTally tally;
  uint64_t errors = 0;
  uint64_t verify_errors = 0;
  uint64_t connect_errors = 0;
  uint64_t closed_errors = 0;
  uint64_t http_errors = 0;
  double ramp_s = 0;
  double wall_s = 0;  // the measured interval plus the wait for the answers owed at its end
  double client_cpu = 0;
  double client_user = 0;
  double server_cpu = -1;  // -1: not measured (no --server-pid)
  double server_user = -1;
  // Over the measured interval: time the threads were runnable while other tasks held their
  // CPUs (s); -1: not measured.
  double client_runqueue_wait = -1;
  double server_runqueue_wait = -1;
  // Over the measured interval: the steal time of the CPUs each side may use (s); -1: not
  // measured.
  double client_cpus_steal = -1;
  double server_cpus_steal = -1;
  const char* backend = "";
};

/// Prints the report on stdout; returns whether the schedule was kept (every request due in
/// the interval answered, and the answers within it reaching the rate, to within 1 % and one
/// per connection at each edge).
bool print_rate_report(const Options& options, const RateResults& results);

}  // namespace bench
