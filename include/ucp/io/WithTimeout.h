#pragma once
// Deadlines and stop tokens for any cancellable operation:
//
//   auto data = co_await ucp::with_timeout(conn.receive(), 5s);   // timed_out after 5 s
//   auto sent = co_await ucp::with_stop(conn.write_all(reply), stop.token());
//   auto page = co_await ucp::with_timeout(loop, 2s, [&](ucp::StopToken stop) {
//     return fetch(conn, stop);                                 // any Task<Result<T>>
//   });
//
// A cancellable awaiter has `EventLoop& loop()` and `void cancel() noexcept` (ask the operation
// to end early, without resuming anything inline) and resumes with a Result whose error is
// operation_canceled when cancel() won. The io operations (io/Operations.h), sleeps, and a
// TcpConnection's read(), receive(), write() and write_all() are all cancellable.
//
// When the deadline passes first the operation is cancelled and the awaiting coroutine resumes
// only after its completion has arrived — the kernel is done with its buffer — with timed_out.
// An operation that completed anyway (data won the race) keeps its result.
//
// The wrappers are cancellable awaiters themselves, so they nest: a connect bounded by an overall
// deadline and a caller's stop token is
//
//   co_await ucp::with_stop(ucp::with_deadline(io::connect(loop, fd, addr, len), due), token);
//
// A deadline of Clock::time_point::max() arms no timer, and a default StopToken registers nothing.
//
// Thread contract: the loop's thread only.

#include <chrono>
#include <concepts>
#include <coroutine>
#include <type_traits>
#include <utility>

#include "ucp/base/Hook.h"
#include "ucp/base/Result.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Timer.h"

namespace ucp {

template <class A>
concept CancellableAwaiter = requires(A& a) {
  { a.loop() } -> std::convertible_to<EventLoop&>;
  { a.cancel() } noexcept;
  a.await_ready();
  a.await_resume();
};

namespace detail {

/// Calls the inner await_suspend, whatever it returns, as a symmetric transfer: the coroutine
/// to resume next (`caller` when the inner did not suspend, noop when nothing runs now).
template <class A>
std::coroutine_handle<> suspend_inner(A& inner, std::coroutine_handle<> caller) {
  using R = decltype(inner.await_suspend(caller));
  if constexpr (std::is_void_v<R>) {
    inner.await_suspend(caller);
    return std::noop_coroutine();
  } else if constexpr (std::is_same_v<R, bool>) {
    return inner.await_suspend(caller) ? std::noop_coroutine() : caller;
  } else {
    static_assert(std::is_convertible_v<R, std::coroutine_handle<>>,
                  "cancellable awaiters suspend with void, bool or a coroutine handle");
    return inner.await_suspend(caller);
  }
}

/// Replaces operation_canceled with `error` (the cancel was ours, for that reason).
template <class R>
R reason_for_cancel(R result, std::errc error) {
  if (!result && result.error() == std::errc::operation_canceled) return Unexpected{error};
  return result;
}

}  // namespace detail

/// Awaits `inner` (a temporary of the co_await expression, or an lvalue that outlives it),
/// cancelling it when `due` passes first.
template <CancellableAwaiter A>
class [[nodiscard]] TimeoutAwaiter : private TimerNode {
 public:
  TimeoutAwaiter(A& inner, Clock::time_point due) noexcept
      : TimerNode(hook<&TimeoutAwaiter::on_fire>), inner_(inner), due_(due) {}
  TimeoutAwaiter(const TimeoutAwaiter&) = delete;
  TimeoutAwaiter& operator=(const TimeoutAwaiter&) = delete;

  bool await_ready() { return inner_.await_ready(); }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) {
    const std::coroutine_handle<> next = detail::suspend_inner(inner_, caller);
    if (next == caller) return caller;  // it did not suspend
    // Nothing resumes the caller before the loop's next completions, or before `next` (which
    // runs after this returns) hands back: arming now is in time.
    if (due_ != Clock::time_point::max()) inner_.loop().add_timer(timer(), due_);
    return next;
  }
  auto await_resume() {
    inner_.loop().cancel_timer(timer());
    if (!fired_) return inner_.await_resume();
    return detail::reason_for_cancel(inner_.await_resume(), std::errc::timed_out);
  }
  // Cancellable in turn, so that a deadline can be wrapped again (with_stop, another deadline).
  EventLoop& loop() noexcept { return inner_.loop(); }
  void cancel() noexcept { inner_.cancel(); }

 private:
  friend HookAccess;
  void on_fire() noexcept {
    fired_ = true;
    inner_.cancel();
  }
  TimerNode& timer() noexcept { return *this; }

  A& inner_;
  Clock::time_point due_;
  bool fired_ = false;
};

/// Awaits `inner`, cancelling it when `token`'s source requests stop (at once if it already
/// has: the operation is then cancelled as soon as it starts).
template <CancellableAwaiter A>
class [[nodiscard]] StopAwaiter : private StopCallbackBase {
 public:
  StopAwaiter(A& inner, StopToken token) noexcept
      : StopCallbackBase(hook<&StopAwaiter::on_stop>), inner_(inner), token_(token) {}
  StopAwaiter(const StopAwaiter&) = delete;
  StopAwaiter& operator=(const StopAwaiter&) = delete;

  bool await_ready() { return inner_.await_ready(); }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) {
    const std::coroutine_handle<> next = detail::suspend_inner(inner_, caller);
    if (next == caller) return caller;  // it did not suspend
    attach(token_);
    return next;
  }
  auto await_resume() {
    detach();
    return inner_.await_resume();
  }
  EventLoop& loop() noexcept { return inner_.loop(); }
  void cancel() noexcept { inner_.cancel(); }

 private:
  friend HookAccess;
  void on_stop() noexcept { inner_.cancel(); }

  A& inner_;
  StopToken token_;
};

template <CancellableAwaiter A, class Rep, class Period>
TimeoutAwaiter<std::remove_reference_t<A>> with_timeout(A&& inner,
                                                        std::chrono::duration<Rep, Period> d) {
  return {inner, Clock::now() + std::chrono::duration_cast<Clock::duration>(d)};
}

template <CancellableAwaiter A>
TimeoutAwaiter<std::remove_reference_t<A>> with_deadline(A&& inner, Clock::time_point due) {
  return {inner, due};
}

template <CancellableAwaiter A>
StopAwaiter<std::remove_reference_t<A>> with_stop(A&& inner, StopToken token) {
  return {inner, token};
}

/// Runs `make(token)` — a function returning Task<Result<T>> that honours the token — and
/// stops it after `d`: its result, or timed_out if the deadline stopped it.
template <class Make, class Rep, class Period>
auto with_timeout(EventLoop& loop, std::chrono::duration<Rep, Period> d, Make make)
    -> Task<typename std::invoke_result_t<Make&, StopToken>::value_type> {
  using R = typename std::invoke_result_t<Make&, StopToken>::value_type;
  StopSource stop;
  struct Timer : TimerNode {
    explicit Timer(StopSource& s) noexcept : TimerNode(hook<&Timer::fire>), source(s) {}
    void fire() noexcept {
      fired = true;
      source.request_stop();
    }
    StopSource& source;
    bool fired = false;
  } timer(stop);
  loop.add_timer(timer, Clock::now() + std::chrono::duration_cast<Clock::duration>(d));
  R result = co_await make(stop.token());
  loop.cancel_timer(timer);
  if (timer.fired) co_return detail::reason_for_cancel(std::move(result), std::errc::timed_out);
  co_return result;
}

}  // namespace ucp
