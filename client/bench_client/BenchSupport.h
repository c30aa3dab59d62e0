#pragma once
// Measurement pieces shared by bench_client's two modes (pingpong in main.cpp, connection
// churn in Churn.cpp): the clock, the verified request stream, the latency histogram and
// CPU accounting.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ucp/metrics/LatencyHistogram.h"

namespace bench {

inline int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------------
// The request stream. Message `seq` of connection `key` is the SIZE bytes of a shared random
// table that start at offset(key, seq): every message differs from its neighbours and from
// every other connection's, yet sending one needs no copy and checking one is one memcmp.
//
//   table: [ .......... kTableSpan random bytes .......... | SIZE more ]
//                ^ offset(key, seq)      ^ offset(key, seq + 1)
//                [---- message seq ----]

inline constexpr size_t kTableSpan = size_t{1} << 20;

inline uint64_t splitmix64(uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class PatternTable {
 public:
  explicit PatternTable(size_t message_size) : bytes_(kTableSpan + message_size) {
    for (size_t i = 0; i < bytes_.size(); i += 8) {
      const uint64_t word = splitmix64(i);
      std::memcpy(bytes_.data() + i, &word, std::min<size_t>(8, bytes_.size() - i));
    }
  }
  /// The first byte of message `seq` of the connection whose key is `key`.
  const char* message(uint64_t key, uint64_t seq) const noexcept {
    return bytes_.data() + splitmix64(key ^ (seq * 0xD1B54A32D192ED03ull)) % kTableSpan;
  }

 private:
  std::vector<char> bytes_;
};

// ---------------------------------------------------------------------------------------------
// Latency histogram: UCP's LatencyHistogram (1 µs .. 10 s, < 1 % error, nanoseconds), read in
// microseconds.

class Histogram : public ucp::metrics::LatencyHistogram {
 public:
  /// The value (µs) below which `fraction` of the samples lie; 0 without samples.
  double percentile_us(double fraction) const noexcept {
    return static_cast<double>(value_at_percentile(fraction * 100.0)) / 1e3;
  }
  double max_us() const noexcept { return static_cast<double>(max_ns()) / 1e3; }
};

/// Writes `histogram`'s percentile distribution to `path` (.hgrm, values in µs); false (errno
/// set) when the file cannot be written.
inline bool write_hgrm(const std::string& path, const Histogram& histogram) {
  std::string text;
  histogram.write_hgrm(text);
  FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) return false;
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  return std::fclose(file) == 0 && written;
}

// ---------------------------------------------------------------------------------------------
// CPU accounting

struct CpuTimes {
  double user_s = 0;
  double system_s = 0;
  double total() const noexcept { return user_s + system_s; }
};

inline CpuTimes self_cpu() noexcept {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

/// utime and stime of every thread of `pid`, from /proc/PID/stat; nullopt once it is gone.
inline std::optional<CpuTimes> process_cpu(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(file, line)) return std::nullopt;
  const auto paren = line.rfind(')');  // the command name may contain spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  for (int n = 3; fields >> field; ++n) {  // fields are numbered from 1; state is field 3
    if (n == 14) utime = std::stoull(field);
    if (n == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return CpuTimes{static_cast<double>(utime) / ticks, static_cast<double>(stime) / ticks};
}

/// Per thread (by TID) of some processes: how long it has been runnable while another task
/// held its CPU (ns), from the second field of /proc/PID/task/TID/schedstat.
using RunQueueWaits = std::map<long, unsigned long long>;

/// The threads of `pids` now; nullopt once one of them is gone, or on a kernel without
/// schedstat.
inline std::optional<RunQueueWaits> runqueue_waits(const std::vector<int>& pids) {
  RunQueueWaits waits;
  for (int pid : pids) {
    std::error_code error;
    std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", error);
    if (error) return std::nullopt;
    for (const auto& task : tasks) {
      std::ifstream file(task.path() / "schedstat");
      unsigned long long run_ns = 0;
      unsigned long long wait_ns = 0;
      if (!(file >> run_ns >> wait_ns)) continue;  // the thread ended meanwhile
      waits[std::strtol(task.path().filename().c_str(), nullptr, 10)] = wait_ns;
    }
  }
  if (waits.empty()) return std::nullopt;
  return waits;
}

/// The run-queue wait between two samples (s): of the threads alive at the second, what they
/// waited since the first (or since they started). A latency tail that comes with this time
/// was made by the machine, not by the program. A thread that ended between the samples (an
/// io_uring worker) takes its share with it.
inline double runqueue_wait_between(const RunQueueWaits& before, const RunQueueWaits& after) {
  unsigned long long waited_ns = 0;
  for (const auto& [tid, wait_ns] : after) {
    const auto earlier = before.find(tid);
    const unsigned long long from = earlier == before.end() ? 0 : earlier->second;
    if (wait_ns > from) waited_ns += wait_ns - from;
  }
  return static_cast<double>(waited_ns) / 1e9;
}

/// The sum over several processes (servers sharing a port); nullopt once one is gone.
inline std::optional<CpuTimes> processes_cpu(const std::vector<int>& pids) {
  CpuTimes sum;
  for (int pid : pids) {
    auto one = process_cpu(pid);
    if (!one) return std::nullopt;
    sum.user_s += one->user_s;
    sum.system_s += one->system_s;
  }
  return sum;
}

/// The CPUs `pid` may run on (its main thread's affinity), added to `cpus`; false once it is
/// gone.
inline bool add_affinity(int pid, cpu_set_t& cpus) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(pid, sizeof mine, &mine) != 0) return false;
  CPU_OR(&cpus, &cpus, &mine);
  return true;
}

/// The steal time of `cpus` so far (s, /proc/stat's eighth figure): time the hypervisor ran
/// something else while these virtual CPUs had work. It stalls a program without any task of
/// the guest taking its CPU, so run-queue wait does not show it. nullopt without /proc/stat.
inline std::optional<double> steal_seconds(const cpu_set_t& cpus) {
  std::ifstream file("/proc/stat");
  std::string line;
  unsigned long long ticks = 0;
  bool any = false;
  while (std::getline(file, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line);
    std::string name;
    unsigned long long value[8] = {};
    fields >> name;
    for (auto& v : value) fields >> v;  // user nice system idle iowait irq softirq steal
    const int cpu = std::atoi(name.c_str() + 3);
    if (!fields || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &cpus)) continue;
    ticks += value[7];
    any = true;
  }
  if (!any) return std::nullopt;
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// The closing lines both modes print: client CPU, and the server's with `units` per
/// server-CPU-second (`unit_name`: "requests", "connections") when it was measured.
inline void print_cpu_summary(double seconds, double client_cpu, double client_user,
                              double server_cpu, double server_user, double units,
                              const char* unit_name) {
  std::printf("client cpu %.2f s (%.0f%% of one core, user %.1f%%)\n", client_cpu,
              100 * client_cpu / seconds, client_cpu > 0 ? 100 * client_user / client_cpu : 0.0);
  if (server_cpu < 0) return;
  std::printf(
      "server cpu %.2f s (%.0f%% of one core, user %.1f%%): %.0f %s per "
      "server-CPU-second\n",
      server_cpu, 100 * server_cpu / seconds, server_cpu > 0 ? 100 * server_user / server_cpu : 0.0,
      server_cpu > 0 ? units / server_cpu : 0.0, unit_name);
}

}  // namespace bench
