#pragma once
// EventLoopThreadPool: N worker threads, each creating and running its own EventLoop.
// The main loop hands connections to `next_loop()` round-robin (docs/design.md, section 2).
//
// Thread contract: start/next_loop/stop_all/join from the owning (main) thread; the loops
// themselves are reached from there only through EventLoop::post and stop.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ucp/io/EventLoop.h"

namespace ucp {

class EventLoopThreadPool {
 public:
  /// With `share_with`, each worker loop shares that loop's kernel-side workers where the
  /// backend can (see EventLoop::create).
  EventLoopThreadPool(size_t threads, const LoopOptions& options,
                      const EventLoop* share_with = nullptr);
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

 private:
  size_t thread_count_;
  LoopOptions options_;
  const EventLoop* share_with_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
  size_t next_ = 0;
};

}  // namespace ucp
