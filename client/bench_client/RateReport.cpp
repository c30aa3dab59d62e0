#include "RateReport.h"

#include <cinttypes>
#include <cstdio>

namespace bench {
namespace {

/// Latencies at or above which a JSON report counts samples (µs).
constexpr int64_t kCountThresholdsUs[] = {100, 1'000, 10'000, 100'000, 1'000'000};

double us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

bool print_rate_report(const Options& options, const RateResults& r) {
  const Histogram& latency = *r.latency;
  const Histogram& pacing = *r.pacing;
  const double interval = options.seconds;
  const double requested = options.rate * interval;
  const double achieved = static_cast<double>(r.tally.answered_in_interval) / interval;
  // Each connection may have one request on either side of an edge of the interval.
  const bool rate_kept =
      static_cast<double>(r.tally.answered_in_interval) + options.conns >= 0.99 * requested;
  const bool kept = rate_kept && r.tally.unanswered == 0;
  // The client's delay matters when it is a tenth of the tail it helps to measure.
  const int64_t pacing_p99 = pacing.value_at_percentile(99);
  const int64_t latency_p99 = latency.value_at_percentile(99);
  const bool client_limited = pacing_p99 * 10 > latency_p99;
  const double units = static_cast<double>(r.tally.completed);

  if (options.json) {
    std::printf(
        "{\"mode\":\"rate\",\"rate\":%.3f,\"achieved_rate\":%.3f,\"scheduled\":%" PRIu64
        ",\"completed\":%" PRIu64 ",\"unanswered\":%" PRIu64 ",\"answered_in_interval\":%" PRIu64
        ",\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"p9999_us\":%.3f,"
        "\"max_us\":%.3f,\"min_us\":%.3f,\"mean_us\":%.3f,\"pacing_p50_us\":%.3f,"
        "\"pacing_p99_us\":%.3f,\"pacing_p999_us\":%.3f,\"pacing_max_us\":%.3f,\"count_ge_us\":{",
        options.rate, achieved, r.tally.scheduled, r.tally.completed, r.tally.unanswered,
        r.tally.answered_in_interval, us(latency.value_at_percentile(50)),
        us(latency.value_at_percentile(90)), us(latency_p99), us(latency.value_at_percentile(99.9)),
        us(latency.value_at_percentile(99.99)), us(latency.max_ns()), us(latency.min_ns()),
        latency.mean_ns() / 1e3, us(pacing.value_at_percentile(50)), us(pacing_p99),
        us(pacing.value_at_percentile(99.9)), us(pacing.max_ns()));
    for (size_t i = 0; i < std::size(kCountThresholdsUs); ++i) {
      std::printf("%s\"%" PRId64 "\":%" PRIu64, i == 0 ? "" : ",", kCountThresholdsUs[i],
                  latency.count_at_or_above(kCountThresholdsUs[i] * 1000));
    }
    std::printf("},\"schedule_kept\":%s,\"client_limited\":%s,\"errors\":%" PRIu64
                ",\"verify_errors\":%" PRIu64 ",\"connect_errors\":%" PRIu64
                ",\"closed_errors\":%" PRIu64 ",\"http_errors\":%" PRIu64
                ",\"seconds\":%.3f,\"wall_s\":%.3f,\"conns\":%d,\"size\":%zu,\"threads\":%d,"
                "\"backend\":\"%s\",\"http\":%s,\"ramp_s\":%.3f,\"client_cpu_s\":%.3f,"
                "\"client_utime_s\":%.3f,\"server_cpu_s\":%.3f,\"server_utime_s\":%.3f,"
                "\"client_runqueue_wait_s\":%.4f,\"server_runqueue_wait_s\":%.4f,"
                "\"client_cpus_steal_s\":%.4f,\"server_cpus_steal_s\":%.4f}\n",
                kept ? "true" : "false", client_limited ? "true" : "false", r.errors,
                r.verify_errors, r.connect_errors, r.closed_errors, r.http_errors, interval,
                r.wall_s, options.conns, options.size, options.threads, r.backend,
                options.http_path.empty() ? "false" : "true", r.ramp_s, r.client_cpu, r.client_user,
                r.server_cpu, r.server_user, r.client_runqueue_wait, r.server_runqueue_wait,
                r.client_cpus_steal, r.server_cpus_steal);
    return kept;
  }

  if (options.http_path.empty()) {
    std::printf("rate %.0f req/s on %d connections, echo %zu B, open loop (%s client, %d thread%s)",
                options.rate, options.conns, options.size, r.backend, options.threads,
                options.threads == 1 ? "" : "s");
  } else {
    std::printf("rate %.0f req/s on %d connections, GET %s, open loop (%s client, %d thread%s)",
                options.rate, options.conns, options.http_path.c_str(), r.backend, options.threads,
                options.threads == 1 ? "" : "s");
  }
  std::printf(": %.2f s measured after %d s of warm-up\n", interval, options.warmup_s);
  std::printf("requests due %" PRIu64 ": answered %" PRIu64 ", unanswered %" PRIu64
              "; achieved %.0f req/s (answers within the interval)\n",
              r.tally.scheduled, r.tally.completed, r.tally.unanswered, achieved);
  std::printf(
      "latency us (from each request's due time): p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  "
      "p99.99 %.1f  max %.1f  (min %.1f, mean %.1f)\n",
      us(latency.value_at_percentile(50)), us(latency.value_at_percentile(90)), us(latency_p99),
      us(latency.value_at_percentile(99.9)), us(latency.value_at_percentile(99.99)),
      us(latency.max_ns()), us(latency.min_ns()), latency.mean_ns() / 1e3);
  std::printf(
      "client pacing delay us (how late the client itself sent): p50 %.1f  p99 %.1f  "
      "p99.9 %.1f  max %.1f\n",
      us(pacing.value_at_percentile(50)), us(pacing_p99), us(pacing.value_at_percentile(99.9)),
      us(pacing.max_ns()));
  std::printf("errors %" PRIu64 " (verification %" PRIu64 ", connect %" PRIu64
              ", lost connections %" PRIu64 ", HTTP status >= 400 %" PRIu64 ")\n",
              r.errors, r.verify_errors, r.connect_errors, r.closed_errors, r.http_errors);
  print_cpu_summary(r.wall_s, r.client_cpu, r.client_user, r.server_cpu, r.server_user, units,
                    "requests");
  if (r.server_runqueue_wait >= 0) {
    std::printf(
        "run-queue wait in the interval (runnable while other tasks held the CPU): "
        "server %.1f ms (%.1f ms/s), client %.1f ms (%.1f ms/s)\n",
        1e3 * r.server_runqueue_wait, 1e3 * r.server_runqueue_wait / interval,
        1e3 * r.client_runqueue_wait, 1e3 * r.client_runqueue_wait / interval);
  }
  if (r.client_cpus_steal >= 0) {
    std::printf(
        "steal time in the interval (the hypervisor ran something else): "
        "client's CPUs %.1f ms",
        1e3 * r.client_cpus_steal);
    if (r.server_cpus_steal >= 0) std::printf(", server's CPUs %.1f ms", 1e3 * r.server_cpus_steal);
    std::printf("\n");
  }
  if (!rate_kept) {
    std::printf(
        "WARNING: the schedule was not kept: %.0f req/s answered of %.0f requested (the "
        "server, or the client, could not keep up; latencies grow with the run)\n",
        achieved, options.rate);
  }
  if (r.tally.unanswered > 0) {
    std::printf("WARNING: %" PRIu64 " requests due in the interval had no answer %" PRId64
                " s after it; they are counted at the latency they had reached then\n",
                r.tally.unanswered, kDrainMs / 1000);
  }
  if (client_limited) {
    std::printf(
        "WARNING: the client's own delay is more than a tenth of the latency it measures "
        "(pacing p99 %.1f us, latency p99 %.1f us): these figures include the client "
        "(lower the rate, add threads with -t, or give the client a quiet CPU)\n",
        us(pacing_p99), us(latency_p99));
  }
  return kept;
}

}  // namespace bench
