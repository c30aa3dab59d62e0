#pragma once
// CpuAffinity: where a server's threads run (the server.cpu_affinity key), and the thread
// names that make them visible in `top -H`, `perf` and /proc (ucp-main, ucp-worker-N).
//
//   (empty)    no pinning: every thread runs where the kernel schedules it.
//   auto       one worker per CPU: worker N on the (N mod n)-th of the n CPUs the process may
//              run on when the server starts (CPU N mod nproc where nothing restricts it);
//              the main loop on the next one, the ((workers) mod n)-th: a CPU of its own when
//              there are more CPUs than workers, else worker 0's.
//   2,3,6-9    a list, one CPU per worker in order: worker N on the (N mod length)-th CPU of
//              the list; the main loop is not pinned (it keeps the CPUs the process was given,
//              so with isolated CPUs in the list it stays on the housekeeping ones).
//
// The SQPOLL thread is placed by event_loop.sqpoll_cpu (LoopOptions), not by this. The main
// loop only accepts, hands connections over and runs timers: the rule keeps it off the
// workers' CPUs where there is a CPU to spare.
//
//   ucp::ServerOptions options;
//   options.cpu_affinity = *ucp::CpuAffinity::parse("auto");
//
// Thread contract: a plain value; the free functions act on the calling thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/base/Result.h"

namespace ucp {

struct CpuAffinity {
  enum class Mode : uint8_t {
    kNone,  // not pinned
    kAuto,  // worker N on the N-th allowed CPU
    kList,  // worker N on cpus[N mod size]
  };
  Mode mode = Mode::kNone;
  std::vector<int> cpus;  // kList: in the order given, ranges expanded

  /// "", "auto" or a comma list of CPU numbers and ranges ("0,2,4-7"), spaces allowed around
  /// the items. The error says what is wrong ("\"4-2\" is an empty range").
  static Result<CpuAffinity, Error> parse(std::string_view text);

  bool pinned() const noexcept { return mode != Mode::kNone; }
  /// The CPU worker `index` runs on, given the CPUs the process may use (allowed_cpus()); -1
  /// when not pinned.
  int worker_cpu(size_t index, const std::vector<int>& allowed) const noexcept;
  /// The CPU the main loop runs on for a server of `workers` workers; -1 when not pinned.
  int main_cpu(size_t workers, const std::vector<int>& allowed) const noexcept;
  /// What was configured: "", "auto" or the list as numbers ("0,2,4,5,6,7").
  std::string to_string() const;
};

/// The CPUs the calling thread may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();
/// Pins the calling thread to `cpu`. The error is the kernel's (EINVAL: a CPU the process may
/// not use, or offline).
Result<void> pin_current_thread(int cpu);
/// Names the calling thread (the kernel keeps the first 15 bytes): /proc/self/task/TID/comm.
void name_current_thread(const std::string& name);
/// "0-3,6" for {0, 1, 2, 3, 6}: the kernel's list notation, for messages.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace ucp
