#include "ucp/io/PeriodicTimer.h"

#include <utility>

namespace ucp {

PeriodicTimer::PeriodicTimer(EventLoop& loop, Clock::duration period,
                             Clock::time_point first_due) noexcept
    : loop_(loop),
      period_(period > Clock::duration::zero() ? period : Clock::duration(1)),
      next_due_(first_due) {}

PeriodicTimer::~PeriodicTimer() {
  if (waiting_ == nullptr) return;
  TickAwaiter* waiting = waiting_;
  waiting->cancel();          // its coroutine resumes with operation_canceled...
  waiting->timer_ = nullptr;  // ...without looking at this timer again
}

uint64_t PeriodicTimer::advance(Clock::time_point now) noexcept {
  // Deadlines next_due_, next_due_ + period, ... that are not after `now`.
  const auto passed = static_cast<uint64_t>((now - next_due_) / period_) + 1;
  next_due_ += period_ * static_cast<Clock::rep>(passed);
  return passed;
}

void PeriodicTimer::stop() noexcept {
  stopped_ = true;
  if (waiting_ != nullptr) waiting_->cancel();
}

// ---- TickAwaiter ----

PeriodicTimer::TickAwaiter::TickAwaiter(PeriodicTimer& timer) noexcept
    : TimerNode(hook<&TickAwaiter::on_fire>), timer_(&timer), loop_(timer.loop_) {}

PeriodicTimer::TickAwaiter::~TickAwaiter() {
  // A frame destroyed while waiting (its loop shut down): nothing may fire into it later.
  loop_.cancel_timer(node());
  if (timer_ != nullptr && timer_->waiting_ == this) timer_->waiting_ = nullptr;
}

bool PeriodicTimer::TickAwaiter::await_ready() const noexcept {
  return timer_->stopped_ || Clock::now() >= timer_->next_due_;
}

void PeriodicTimer::TickAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  caller_ = caller;
  timer_->waiting_ = this;
  loop_.add_timer(node(), timer_->next_due_);
}

void PeriodicTimer::TickAwaiter::on_fire() noexcept {
  timer_->waiting_ = nullptr;
  loop_.schedule(std::exchange(caller_, {}));
}

void PeriodicTimer::TickAwaiter::cancel() noexcept {
  if (!caller_) return;  // not waiting, or the tick has fired already: it stands
  cancelled_ = true;
  if (timer_ != nullptr) timer_->waiting_ = nullptr;
  loop_.cancel_timer(node());
  loop_.schedule(std::exchange(caller_, {}));
}

Result<uint64_t> PeriodicTimer::TickAwaiter::await_resume() noexcept {
  if (cancelled_ || timer_ == nullptr || timer_->stopped_) {
    return Unexpected{std::errc::operation_canceled};
  }
  return timer_->advance(Clock::now());
}

}  // namespace ucp
