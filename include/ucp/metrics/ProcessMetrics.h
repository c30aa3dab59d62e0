#pragma once
// ProcessMetrics: what every process exports about itself, under the names Prometheus'
// client libraries use, read from /proc at scrape time; and ucp_build_info.
//
//   registry.add_collector(metrics::write_process_metrics);
//   registry.add_collector(metrics::write_build_info);
//
// Thread contract: any thread (each call reads /proc/self anew).

#include <cstdint>
#include <optional>

#include "ucp/metrics/Exposition.h"

namespace ucp::metrics {

/// The figures behind the process_* families.
struct ProcessStats {
  double cpu_seconds = 0;         // user + system time of every thread
  uint64_t resident_bytes = 0;    // RSS
  uint64_t virtual_bytes = 0;     // address space
  uint64_t open_fds = 0;          // entries of /proc/self/fd
  uint64_t max_fds = 0;           // RLIMIT_NOFILE (soft)
  double start_time_seconds = 0;  // since the Unix epoch
};

/// Reads them from /proc/self/stat, /proc/stat (boot time), /proc/self/fd and getrlimit;
/// nullopt where /proc is not mounted.
std::optional<ProcessStats> read_process_stats();

/// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
/// process_open_fds, process_max_fds, process_start_time_seconds; nothing without /proc.
void write_process_metrics(Exposition& out);

/// ucp_build_info{version="0.1.0"} 1: the UCP version this binary was built from.
void write_build_info(Exposition& out);

}  // namespace ucp::metrics
