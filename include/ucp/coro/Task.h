#pragma once
// Task<T>: a lazy coroutine that produces a T (or void) for the one coroutine awaiting it.
//
// - Lazy: the body starts when the task is awaited (or handed to EventLoop::spawn).
// - Constant stack: a child that completes without suspending hands its result back to the
//   awaiter's await_suspend, which goes on at once; one that suspends resumes its awaiter
//   when it finishes. Long runs of synchronous completions never grow the stack, whether or
//   not the compiler makes symmetric transfer a tail call.
// - Results and exceptions propagate through co_await. UCP's I/O layer reports errors as
//   Result values and never throws; the exception path is for user code.
// - Destroying a Task that has not finished destroys its frame (and, through the awaiting
//   chain, nothing else): no leaks when a task is dropped early.
// - Frames come from the per-thread MemoryPool.
//
// Thread contract: a Task is created, awaited and destroyed on one thread at a time.

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "ucp/memory/MemoryPool.h"

namespace ucp {

template <class T = void>
class Task;

namespace detail {

struct PromiseBase : PoolAllocated {
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      PromiseBase& promise = self.promise();
      // Finished inside the awaiter's own resume() (Task::await_suspend): return to it, and it
      // goes on with the result. Resuming the awaiter from here instead would nest it one
      // level deeper on the stack for every child that completes without suspending.
      if (promise.running_inline) return std::noop_coroutine();
      auto next = promise.continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { exception = std::current_exception(); }
  void rethrow_if_failed() const {
    if (exception) std::rethrow_exception(exception);
  }

  std::coroutine_handle<> continuation;
  std::exception_ptr exception;
  bool running_inline = false;  // started by Task::await_suspend, which is still on the stack
};

/// Where a promise keeps what the coroutine returned: a value, or nothing for Task<void>.
template <class T>
struct ResultHolder : PromiseBase {
  template <class U>
  void return_value(U&& value) {
    result.emplace(std::forward<U>(value));
  }
  std::optional<T> result;
};

template <>
struct ResultHolder<void> : PromiseBase {
  void return_void() const noexcept {}
};

}  // namespace detail

template <class T>
class [[nodiscard]] Task {
 public:
  struct promise_type : detail::ResultHolder<T> {
    Task get_return_object() noexcept { return Task{Handle::from_promise(*this)}; }
  };
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = T;

  Task() noexcept = default;
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  ~Task() {
    if (handle_) handle_.destroy();
  }

  bool valid() const noexcept { return static_cast<bool>(handle_); }
  bool done() const noexcept { return handle_ && handle_.done(); }

  bool await_ready() const noexcept { return false; }
  /// Runs the child now, on this thread, until it finishes or first suspends. A child that
  /// finishes at once lets the caller go on without suspending (false), so a loop awaiting
  /// thousands of such children in a row uses constant stack whether or not the compiler turns
  /// symmetric transfer into tail calls (it does not under AddressSanitizer). One that
  /// suspends resumes the caller when it finishes.
  bool await_suspend(std::coroutine_handle<> caller) noexcept {
    auto& promise = handle_.promise();
    promise.continuation = caller;
    promise.running_inline = true;
    handle_.resume();
    promise.running_inline = false;
    return !handle_.done();
  }
  T await_resume() {
    handle_.promise().rethrow_if_failed();
    if constexpr (!std::is_void_v<T>) return std::move(*handle_.promise().result);
  }

  /// Hands the frame over (EventLoop::spawn takes it this way).
  Handle release() noexcept { return std::exchange(handle_, {}); }

 private:
  explicit Task(Handle handle) noexcept : handle_(handle) {}
  Handle handle_;
};

}  // namespace ucp
