#pragma once
// Timers of one loop: intrusive nodes in a per-loop 4-ary min-heap, driven by the loop's wait
// timeout (no kernel timer object per timer, no allocation per timer).
//
//   class Session : private ucp::TimerNode {  // lives in its owner, e.g. a connection
//     Session() : TimerNode(ucp::hook<&Session::on_timer>) {}  // ucp/base/Hook.h
//     void on_timer() noexcept;
//     friend ucp::HookAccess;
//   };
//   loop.add_timer(node, loop.now() + 5s);   // fire once, about then (node: the TimerNode)
//   loop.add_timer(node, later);             // moving it later is O(1): see below
//   loop.cancel_timer(node);                 // or let ~TimerNode do it
//
// Each node carries two times: `due`, when it should fire, and the heap key it was queued
// under. Moving a queued timer later only updates `due` (the node is re-queued when its old
// key comes up), so a read deadline pushed back on every request costs O(1), not O(log n).
// Moving it earlier, adding and cancelling are O(log n). A callback runs on the loop thread
// after the completions of that iteration; it must only schedule coroutines (never resume one
// inline) and may add or cancel timers, itself included.
//
// Thread contract: the owning loop's thread only.

#include <chrono>
#include <cstdint>
#include <limits>

#include "ucp/base/Hook.h"

namespace ucp {

/// The one clock of UCP's loops and timers.
using Clock = std::chrono::steady_clock;

namespace detail {
class TimerQueue;
}

/// One timer of a loop (see above): intrusive, so it lives in its owner, which holds it as a
/// base and is found from it by the callback hook<&Owner::f> makes (ucp/base/Hook.h; a plain
/// function taking the node does too). Destroying a queued node removes it from the heap. The
/// owning loop's thread only.
class TimerNode {
 public:
  using Fire = void (*)(TimerNode&) noexcept;
  static constexpr uint32_t kNotQueued = std::numeric_limits<uint32_t>::max();

  explicit TimerNode(Fire fire = nullptr) noexcept : fire_(fire) {}
  TimerNode(const TimerNode&) = delete;
  TimerNode& operator=(const TimerNode&) = delete;
  ~TimerNode();

  void set_callback(Fire fire) noexcept { fire_ = fire; }
  /// Queued and due to fire (not cancelled).
  bool armed() const noexcept { return index_ != kNotQueued && due_ != Clock::time_point::max(); }
  Clock::time_point due() const noexcept { return due_; }

 private:
  friend class detail::TimerQueue;
  Fire fire_;
  detail::TimerQueue* queue_ = nullptr;
  Clock::time_point due_ = Clock::time_point::max();  // max: disarmed
  Clock::time_point key_{};                           // what the heap orders by
  uint32_t index_ = kNotQueued;
};

}  // namespace ucp
