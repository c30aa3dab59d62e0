#include "ucp/metrics/ProcessMetrics.h"

#include <cstdio>
#include <cstring>
#include <string>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ucp/version.h"

namespace ucp::metrics {
namespace {

/// The whole of a small /proc file (they report a size of 0, so read until EOF).
std::optional<std::string> slurp(const char* path) {
  FILE* file = std::fopen(path, "re");
  if (file == nullptr) return std::nullopt;
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  std::fclose(file);
  return text;
}

/// Seconds since the epoch at which the system booted (/proc/stat "btime").
std::optional<uint64_t> boot_time() {
  const auto stat = slurp("/proc/stat");
  if (!stat) return std::nullopt;
  const auto at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(stat->c_str() + at + 7, nullptr, 10);
}

std::optional<uint64_t> count_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  uint64_t n = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n > 0 ? n - 1 : 0;  // the directory stream's own descriptor
}

}  // namespace

std::optional<ProcessStats> read_process_stats() {
  const auto stat = slurp("/proc/self/stat");
  if (!stat) return std::nullopt;
  // Field 2, the command name, may hold spaces and parentheses: count from the last ')'.
  const auto paren = stat->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  // Fields 3.. after it; we need 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss.
  unsigned long long field[25] = {};
  const char* p = stat->c_str() + paren + 1;
  for (int n = 3; n <= 24 && *p != '\0'; ++n) {
    while (*p == ' ') ++p;
    field[n] = std::strtoull(p, nullptr, 10);  // field 3 (state) is a letter: reads as 0
    while (*p != ' ' && *p != '\0') ++p;
  }
  const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  ProcessStats stats;
  stats.cpu_seconds = static_cast<double>(field[14] + field[15]) / ticks;
  stats.virtual_bytes = field[23];
  stats.resident_bytes = field[24] * page;
  if (const auto boot = boot_time()) {
    stats.start_time_seconds = static_cast<double>(*boot) + static_cast<double>(field[22]) / ticks;
  }
  stats.open_fds = count_fds().value_or(0);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    stats.max_fds = limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : limit.rlim_cur;
  }
  return stats;
}

void write_process_metrics(Exposition& out) {
  const auto stats = read_process_stats();
  if (!stats) return;
  out.family("process_cpu_seconds_total", MetricType::kCounter,
             "Total user and system CPU time spent in seconds.");
  out.sample("process_cpu_seconds_total", {}, stats->cpu_seconds);
  out.family("process_resident_memory_bytes", MetricType::kGauge, "Resident memory size in bytes.");
  out.sample("process_resident_memory_bytes", {}, stats->resident_bytes);
  out.family("process_virtual_memory_bytes", MetricType::kGauge, "Virtual memory size in bytes.");
  out.sample("process_virtual_memory_bytes", {}, stats->virtual_bytes);
  out.family("process_open_fds", MetricType::kGauge, "Number of open file descriptors.");
  out.sample("process_open_fds", {}, stats->open_fds);
  out.family("process_max_fds", MetricType::kGauge, "Maximum number of open file descriptors.");
  out.sample("process_max_fds", {}, stats->max_fds);
  out.family("process_start_time_seconds", MetricType::kGauge,
             "Start time of the process since unix epoch in seconds.");
  out.sample("process_start_time_seconds", {}, stats->start_time_seconds);
}

void write_build_info(Exposition& out) {
  out.family("ucp_build_info", MetricType::kGauge,
             "The UCP version this binary was built from (always 1).");
  out.sample("ucp_build_info", {{"version", UCP_VERSION_STRING}}, uint64_t{1});
}

}  // namespace ucp::metrics
