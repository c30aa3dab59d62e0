#pragma once
// when_all: run several tasks at once and wait for all of them.
//
//   auto [user, orders] = co_await ucp::when_all(fetch_user(conn, id), fetch_orders(db, id));
//   std::vector<int> sizes = co_await ucp::when_all(std::move(tasks));   // a vector of Task<int>
//
// The tasks start one after the other, each running until it first suspends, so their waits
// overlap; when_all resumes its caller once the last has finished, on the thread that finished
// it. The results come back in argument order; a Task<void> contributes std::monostate (the
// vector form of Task<void> returns nothing). If tasks threw, the first one's exception (in
// argument order) is rethrown once all have finished: no task outlives when_all.
//
// Every task finishes before when_all returns, so pass tasks that end on their own or honour a
// stop token (see when_any for "first one wins").
//
// Thread contract: loop-agnostic. Tasks normally run on the caller's loop; one that moved to
// another loop (resume_on) may finish there, and the caller then resumes on that thread.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ucp/coro/Task.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp {

namespace detail {

template <class T>
using NonVoid = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

/// Counts the children still running plus one for the parent until it has started them all;
/// whoever brings it to zero resumes the parent (or, for the parent, does not suspend).
class WhenAllLatch {
 public:
  explicit WhenAllLatch(size_t children) noexcept : count_(children + 1) {}
  bool arrive() noexcept { return count_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  std::coroutine_handle<> parent;

 private:
  std::atomic<size_t> count_;
};

template <class T>
struct WhenAllChildResult {
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  std::optional<T> value;
};
template <>
struct WhenAllChildResult<void> {
  void return_void() noexcept {}
};

/// A started-by-hand coroutine that runs one task and reports to the latch when it ends.
template <class T>
class WhenAllChild {
 public:
  struct promise_type : PoolAllocated, WhenAllChildResult<T> {
    WhenAllLatch* latch = nullptr;
    std::exception_ptr exception;

    struct Final {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        WhenAllLatch& latch = *self.promise().latch;
        return latch.arrive() ? latch.parent : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    WhenAllChild get_return_object() noexcept {
      return WhenAllChild(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    Final final_suspend() const noexcept { return {}; }
    void unhandled_exception() noexcept { exception = std::current_exception(); }
  };

  WhenAllChild(WhenAllChild&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  WhenAllChild(const WhenAllChild&) = delete;
  WhenAllChild& operator=(const WhenAllChild&) = delete;
  WhenAllChild& operator=(WhenAllChild&&) = delete;
  ~WhenAllChild() {
    if (handle_) handle_.destroy();
  }

  void start(WhenAllLatch& latch) {
    handle_.promise().latch = &latch;
    handle_.resume();
  }
  void rethrow_if_failed() const {
    if (handle_.promise().exception) std::rethrow_exception(handle_.promise().exception);
  }
  NonVoid<T> take() {
    if constexpr (std::is_void_v<T>) {
      return {};
    } else {
      return std::move(*handle_.promise().value);
    }
  }

 private:
  explicit WhenAllChild(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

template <class T>
  requires(!std::is_void_v<T>)
WhenAllChild<T> make_when_all_child(Task<T> task) {
  co_return co_await std::move(task);
}
inline WhenAllChild<void> make_when_all_child(Task<void> task) { co_await std::move(task); }

/// Starts the children, then suspends the parent unless they have all finished already.
template <class Start>
struct StartChildren {
  WhenAllLatch& latch;
  Start start;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> parent) {
    latch.parent = parent;
    start();
    return !latch.arrive();
  }
  void await_resume() const noexcept {}
};
template <class Start>
StartChildren(WhenAllLatch&, Start) -> StartChildren<Start>;

}  // namespace detail

template <class... T>
Task<std::tuple<detail::NonVoid<T>...>> when_all(Task<T>... tasks) {
  detail::WhenAllLatch latch(sizeof...(T));
  std::tuple<detail::WhenAllChild<T>...> children(detail::make_when_all_child(std::move(tasks))...);
  co_await detail::StartChildren{
      latch, [&] { std::apply([&](auto&... child) { (child.start(latch), ...); }, children); }};
  std::apply([](auto&... child) { (child.rethrow_if_failed(), ...); }, children);
  co_return std::apply(
      [](auto&... child) { return std::tuple<detail::NonVoid<T>...>(child.take()...); }, children);
}

template <class T>
  requires(!std::is_void_v<T>)
Task<std::vector<T>> when_all(std::vector<Task<T>> tasks) {
  detail::WhenAllLatch latch(tasks.size());
  std::vector<detail::WhenAllChild<T>> children;
  children.reserve(tasks.size());
  for (auto& task : tasks) children.push_back(detail::make_when_all_child(std::move(task)));
  co_await detail::StartChildren{latch, [&] {
                                   for (auto& child : children) child.start(latch);
                                 }};
  for (auto& child : children) child.rethrow_if_failed();
  std::vector<T> results;
  results.reserve(children.size());
  for (auto& child : children) results.push_back(child.take());
  co_return results;
}

inline Task<> when_all(std::vector<Task<>> tasks) {
  detail::WhenAllLatch latch(tasks.size());
  std::vector<detail::WhenAllChild<void>> children;
  children.reserve(tasks.size());
  for (auto& task : tasks) children.push_back(detail::make_when_all_child(std::move(task)));
  co_await detail::StartChildren{latch, [&] {
                                   for (auto& child : children) child.start(latch);
                                 }};
  for (auto& child : children) child.rethrow_if_failed();
}

}  // namespace ucp
