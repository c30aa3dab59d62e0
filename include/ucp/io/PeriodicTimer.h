#pragma once
// PeriodicTimer: ticks at fixed times, start + k * period, on the loop's timer heap.
//
//   ucp::PeriodicTimer every_second(loop, std::chrono::seconds(1));
//   while (auto ticks = co_await every_second.tick()) {
//     flush_metrics();              // *ticks > 1: the coroutine came late and ticks were missed
//   }                               // error: operation_canceled (stop(), with_stop, shutdown)
//
// Drift-free: the deadlines do not move with the time the work between ticks takes or with
// the loop's lateness, so a 1 s timer still ticks 3600 times an hour. A coroutine that comes
// back after several deadlines passed gets one tick whose value says how many (missed ticks are
// not replayed in a burst), and the next deadline is the first one still ahead.
//
// tick() is a cancellable awaiter (with_stop, with_timeout). stop() ends the waiting tick and
// every later one with operation_canceled.
//
// Thread contract: the loop's thread only. One coroutine awaits a timer at a time. Destroying
// the timer ends a waiting tick with operation_canceled.

#include <chrono>
#include <coroutine>
#include <cstdint>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Timer.h"

namespace ucp {

class PeriodicTimer {
 public:
  /// Ticks at first_due, first_due + period, ... (period must be positive).
  PeriodicTimer(EventLoop& loop, Clock::duration period, Clock::time_point first_due) noexcept;
  /// The first tick one period from now.
  PeriodicTimer(EventLoop& loop, Clock::duration period) noexcept
      : PeriodicTimer(loop, period, Clock::now() + period) {}
  PeriodicTimer(const PeriodicTimer&) = delete;
  PeriodicTimer& operator=(const PeriodicTimer&) = delete;
  ~PeriodicTimer();

  class [[nodiscard]] TickAwaiter : private TimerNode {
   public:
    explicit TickAwaiter(PeriodicTimer& timer) noexcept;
    TickAwaiter(const TickAwaiter&) = delete;
    TickAwaiter& operator=(const TickAwaiter&) = delete;
    ~TickAwaiter();
    /// A deadline already passed (or the timer stopped): no suspension.
    bool await_ready() const noexcept;
    void await_suspend(std::coroutine_handle<> caller) noexcept;
    /// How many deadlines passed since the previous tick (>= 1), or operation_canceled.
    Result<uint64_t> await_resume() noexcept;
    void cancel() noexcept;
    EventLoop& loop() const noexcept { return loop_; }

   private:
    friend class PeriodicTimer;
    friend HookAccess;
    void on_fire() noexcept;
    TimerNode& node() noexcept { return *this; }

    PeriodicTimer* timer_;  // null once the timer is gone (its destructor cancelled us)
    EventLoop& loop_;
    std::coroutine_handle<> caller_;
    bool cancelled_ = false;
  };

  TickAwaiter tick() noexcept { return TickAwaiter(*this); }
  /// Ends the waiting tick, and every later one, with operation_canceled.
  void stop() noexcept;
  bool stopped() const noexcept { return stopped_; }
  Clock::duration period() const noexcept { return period_; }
  /// The next deadline.
  Clock::time_point next_due() const noexcept { return next_due_; }

 private:
  /// Counts the deadlines passed by `now` and moves next_due_ past them.
  uint64_t advance(Clock::time_point now) noexcept;

  EventLoop& loop_;
  Clock::duration period_;
  Clock::time_point next_due_;
  TickAwaiter* waiting_ = nullptr;
  bool stopped_ = false;
};

}  // namespace ucp
