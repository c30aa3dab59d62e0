#pragma once
// An EventLoop running on its own thread, for tests that span loops.

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "LoopRunner.h"

namespace ucp::test {

class LoopThread {
 public:
  LoopThread() : loop_(make_loop()) {}
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;
  ~LoopThread() { stop_and_join(); }

  EventLoop& loop() { return *loop_; }

  /// Starts the thread; `body` is spawned on it (its frame runs only on the loop thread).
  /// When the body finishes the loop stops.
  void start(Task<> body) {
    loop_->post([this, task = std::move(body)]() mutable {
      loop_->spawn([](EventLoop& l, Task<> inner, std::atomic<bool>& done) -> Task<> {
        co_await std::move(inner);
        done.store(true);
        l.stop();
      }(*loop_, std::move(task), finished_));
    });
    thread_ = std::thread([this] { loop_->run(); });
  }
  bool finished() const { return finished_.load(); }
  void stop_and_join() {
    if (!thread_.joinable()) return;
    loop_->stop();
    thread_.join();
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

/// Waits (bounded) until every loop's body finished. False on timeout.
template <class Loops>
bool wait_all_finished(Loops& loops, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto& loop : loops) {
    while (!loop->finished()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return true;
}

}  // namespace ucp::test
