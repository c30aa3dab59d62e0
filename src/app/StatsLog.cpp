#include "StatsLog.h"

#include <fmt/format.h>

#include "ucp/io/PeriodicTimer.h"
#include "ucp/log/Logger.h"

namespace ucp::app {

StatsTotals StatsTotals::from(const ServerStats& stats) {
  StatsTotals totals;
  totals.rejected = stats.connections_rejected;
  const auto add_loop = [&totals](const LoopStats& loop) {
    totals.submit_calls += loop.submit_calls;
    totals.completion_overflows += loop.completion_overflows;
    totals.rejected_submissions += loop.rejected_submissions;
  };
  add_loop(stats.main_loop);
  for (const WorkerCounters& worker : stats.workers) {
    totals.open += worker.connections_open;
    totals.accepted += worker.connections_accepted;
    totals.bytes_in += worker.bytes_received;
    totals.bytes_out += worker.bytes_sent;
    totals.accepted_per_worker.push_back(worker.connections_accepted);
    add_loop(worker.loop);
  }
  return totals;
}

std::string format_stats_line(const StatsTotals& before, const StatsTotals& now,
                              std::chrono::milliseconds interval) {
  // Counters only grow; a difference that would be negative (never expected) shows as 0.
  const auto delta = [](uint64_t from, uint64_t to) { return to >= from ? to - from : 0; };
  std::string line =
      fmt::format("stats: interval_ms={} open={} accepted={} rejected={} bytes_in={} bytes_out={}",
                  interval.count(), now.open, delta(before.accepted, now.accepted),
                  delta(before.rejected, now.rejected), delta(before.bytes_in, now.bytes_in),
                  delta(before.bytes_out, now.bytes_out));
  if (now.requests) {
    line += fmt::format(" requests={}", delta(before.requests.value_or(0), *now.requests));
  }
  line += fmt::format(" submit_calls={} cq_overflows={} rejected_submissions={}",
                      delta(before.submit_calls, now.submit_calls),
                      delta(before.completion_overflows, now.completion_overflows),
                      delta(before.rejected_submissions, now.rejected_submissions));
  line += " accepted_per_worker=";
  for (size_t i = 0; i < now.accepted_per_worker.size(); ++i) {
    const uint64_t from = i < before.accepted_per_worker.size() ? before.accepted_per_worker[i] : 0;
    if (i > 0) line += '/';
    line += std::to_string(delta(from, now.accepted_per_worker[i]));
  }
  return line;
}

Task<> log_stats(TcpServer& server, std::chrono::milliseconds interval, RequestCounter requests) {
  // The first line counts from the start, where every counter is zero. (A snapshot taken here
  // instead would race the first clients: the workers serve them while the main loop waits for
  // the snapshot, and what they did before it was read would be in no line.)
  StatsTotals before;
  if (requests) before.requests = 0;
  PeriodicTimer timer(server.main_loop(), interval);
  while (auto ticks = co_await timer.tick()) {
    const ServerStats stats = co_await server.collect_stats();
    if (stats.workers.empty()) co_return;  // stopping
    StatsTotals now = StatsTotals::from(stats);
    if (requests) now.requests = requests();
    // After missed ticks (a loop too busy to run the timer) the counts cover them all.
    LOG_INFO("{}", format_stats_line(before, now, interval * static_cast<int64_t>(*ticks)));
    before = std::move(now);
  }
}

}  // namespace ucp::app
