#pragma once
// StatsLog: the runtime's periodic stats line (log.stats_interval_ms). Every
// interval the main loop collects the workers' counters (TcpServer::collect_stats, read on
// each worker's own thread) and logs one INFO line; counts are for the interval just ended
// (the first line's from the start), except `open`, which is the number open now, so the lines
// add up to the totals since the start:
//
//   stats: interval_ms=60000 open=118 accepted=2400 rejected=0 bytes_in=1843200
//   bytes_out=1843200 requests=57600 submit_calls=41210 cq_overflows=0
//   rejected_submissions=0 accepted_per_worker=1188/1212
//
// (one line; `requests` only where the HTTP layer answers them). The connections' paths pay
// nothing for it: the TCP counters are plain per-worker integers and per-connection byte
// counts, and the HTTP counters the layer keeps anyway.
//
// Private to src/app (Application runs it). Thread contract: log_stats runs on the server's
// main loop; format_stats_line anywhere.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/net/TcpServer.h"

namespace ucp::app {

/// The cumulative figures one stats line is the difference of.
struct StatsTotals {
  uint64_t open = 0;
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::optional<uint64_t> requests;  // only where a layer counts them
  uint64_t submit_calls = 0;         // every loop, the main one included
  uint64_t completion_overflows = 0;
  uint64_t rejected_submissions = 0;
  std::vector<uint64_t> accepted_per_worker;

  /// Sums a snapshot (workers and the main loop).
  static StatsTotals from(const ServerStats& stats);
};

/// "stats: interval_ms=... open=... accepted=..." for the interval from `before` to `now`.
std::string format_stats_line(const StatsTotals& before, const StatsTotals& now,
                              std::chrono::milliseconds interval);

/// Requests answered so far, for the line's `requests` (empty: the server counts none).
using RequestCounter = UniqueFunction<uint64_t()>;

/// Logs a stats line every `interval` until the server stops.
Task<> log_stats(TcpServer& server, std::chrono::milliseconds interval, RequestCounter requests);

}  // namespace ucp::app
