#pragma once
// EventLoopThreadPool: N worker threads, each creating and running its own EventLoop.
// The main loop hands connections to `next_loop()` round-robin (docs/design.md, section 2).
// Worker N is named ucp-worker-N and, with a CpuAffinity, pinned before it creates its loop (so
// that the ring's memory is first touched on that CPU); place_main_thread() does the same for
// the thread that runs the main loop (ucp-main).
//
// Thread contract: start/next_loop/stop_all/join from the owning (main) thread; the loops
// themselves are reached from there only through EventLoop::post and stop.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ucp/io/EventLoop.h"
#include "ucp/net/CpuAffinity.h"

namespace ucp {

class EventLoopThreadPool {
 public:
  /// With `share_with`, each worker loop shares that loop's kernel-side workers where the
  /// backend can (see EventLoop::create).
  EventLoopThreadPool(size_t threads, const LoopOptions& options,
                      const EventLoop* share_with = nullptr, CpuAffinity affinity = {});
  EventLoopThreadPool(const EventLoopThreadPool&) = delete;
  EventLoopThreadPool& operator=(const EventLoopThreadPool&) = delete;
  ~EventLoopThreadPool();

  /// Starts every thread and waits until each has its ring. On failure the threads that
  /// did start are stopped and the Error says why in one line; warnings are appended.
  Result<void, Error> start(std::string* warnings);
  EventLoop& next_loop() noexcept;
  const std::vector<std::unique_ptr<EventLoop>>& loops() const noexcept { return loops_; }
  void stop_all() noexcept;
  void join() noexcept;

  /// After start(): the CPU worker `index` runs on, and the one the main loop should run on
  /// (CpuAffinity's rule); -1 = not pinned.
  int worker_cpu(size_t index) const noexcept;
  int main_cpu() const noexcept;
  /// Names the calling thread ucp-main and pins it to main_cpu() (a failure is one WARN: the
  /// main loop then runs unpinned).
  void place_main_thread() const;
  /// "threads ucp-main (CPU 2), ucp-worker-0..1 (CPUs 0,1), cpu_affinity=auto", for the
  /// start-up line.
  std::string describe_placement() const;

 private:
  size_t thread_count_;
  LoopOptions options_;
  const EventLoop* share_with_;
  CpuAffinity affinity_;
  std::vector<int> allowed_cpus_;  // the CPUs the process could use when start() ran
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
  size_t next_ = 0;
};

}  // namespace ucp
