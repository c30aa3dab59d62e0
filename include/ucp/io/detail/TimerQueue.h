#pragma once
// TimerQueue: the heap of one loop's timers (io/Timer.h says how they behave). The EventLoop
// owns it; timers are added and cancelled through EventLoop::add_timer / cancel_timer.
//
// Thread contract: the owning loop's thread only.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ucp/io/Timer.h"

namespace ucp::detail {

/// The heap. EventLoop owns one; add/cancel go through EventLoop::add_timer/cancel_timer.
class TimerQueue {
 public:
  TimerQueue() = default;
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;
  ~TimerQueue();

  /// (Re)schedules `node` to fire at `due`.
  void add(TimerNode& node, Clock::time_point due);
  /// Stops `node` from firing. Lazy: the entry leaves the heap when its key comes up, unless
  /// `remove` is true (the node is about to die).
  void cancel(TimerNode& node, bool remove = false) noexcept;
  /// Fires every timer due at or before `now`. Returns how many fired.
  size_t fire_due(Clock::time_point now) noexcept;
  /// When the next entry comes up (max() if none). May be earlier than any timer's due: an
  /// entry moved later fires nothing and is re-queued.
  Clock::time_point next_key() const noexcept {
    return heap_.empty() ? Clock::time_point::max() : heap_.front()->key_;
  }
  size_t size() const noexcept { return heap_.size(); }
  /// Armed timers (queued entries that will fire).
  size_t armed() const noexcept { return armed_; }

 private:
  void push(TimerNode& node, Clock::time_point key);
  void erase(TimerNode& node) noexcept;
  void sift_up(uint32_t index) noexcept;
  void sift_down(uint32_t index) noexcept;
  void place(TimerNode* node, uint32_t index) noexcept {
    heap_[index] = node;
    node->index_ = index;
  }

  std::vector<TimerNode*> heap_;
  size_t armed_ = 0;
};

}  // namespace ucp::detail
