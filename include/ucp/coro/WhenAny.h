#pragma once
// when_any: run several tasks at once; the first to finish wins and the others are stopped.
//
//   ucp::StopSource stop;                      // the losers are stopped through it
//   auto first = co_await ucp::when_any(stop, ask(replica_a, stop.token()),
//                                             ask(replica_b, stop.token()));
//   use(first.index, first.value);             // which task won, and what it returned
//
// The tasks must have been given tokens of `stop` and pass them to what they await (with_stop,
// TcpClient's options, a Channel...). When the first task finishes, when_any requests stop on
// `stop`; the others end early (usually with operation_canceled), and when_any returns only
// after every one of them has finished: no task outlives it, so nothing is left holding the
// caller's buffers. Tasks are started in argument order, each running until it first suspends;
// if one finishes during that, the ones after it are never started. The winner's exception, if
// it threw, is rethrown; the losers' results and exceptions are dropped.
//
// Thread contract: StopSource belongs to one loop, so the tasks must stay on the caller's loop.

#include <coroutine>
#include <cstddef>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/coro/WhenAll.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp {

/// What when_any returns: the winner's position among the arguments and its result
/// (std::monostate for Task<void>).
template <class T>
struct WhenAnyResult {
  size_t index = 0;
  T value;
};

namespace detail {

struct WhenAnyState {
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();
  StopSource* stop = nullptr;
  std::coroutine_handle<> parent;
  size_t running = 1;  // the started children plus the parent while it starts them
  size_t winner = kNone;
};

template <class T>
class WhenAnyChild {
 public:
  struct promise_type : PoolAllocated, WhenAllChildResult<T> {
    WhenAnyState* state = nullptr;
    size_t index = 0;
    std::exception_ptr exception;

    struct Final {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        promise_type& p = self.promise();
        WhenAnyState& state = *p.state;
        if (state.winner == WhenAnyState::kNone) {
          state.winner = p.index;
          state.stop->request_stop();  // the callbacks only ask operations to end
        }
        return --state.running == 0 ? state.parent : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    WhenAnyChild get_return_object() noexcept {
      return WhenAnyChild(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    Final final_suspend() const noexcept { return {}; }
    void unhandled_exception() noexcept { exception = std::current_exception(); }
  };

  WhenAnyChild(WhenAnyChild&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  WhenAnyChild(const WhenAnyChild&) = delete;
  WhenAnyChild& operator=(const WhenAnyChild&) = delete;
  WhenAnyChild& operator=(WhenAnyChild&&) = delete;
  ~WhenAnyChild() {
    if (handle_) handle_.destroy();
  }

  void start(WhenAnyState& state, size_t index) {
    handle_.promise().state = &state;
    handle_.promise().index = index;
    ++state.running;
    handle_.resume();
  }
  NonVoid<T> take() {
    if (handle_.promise().exception) std::rethrow_exception(handle_.promise().exception);
    if constexpr (std::is_void_v<T>) {
      return {};
    } else {
      return std::move(*handle_.promise().value);
    }
  }

 private:
  explicit WhenAnyChild(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

template <class T>
  requires(!std::is_void_v<T>)
WhenAnyChild<T> make_when_any_child(Task<T> task) {
  co_return co_await std::move(task);
}
inline WhenAnyChild<void> make_when_any_child(Task<void> task) { co_await std::move(task); }

/// Starts children until one has won, then suspends the parent until all started ones end.
template <class T>
struct StartRace {
  WhenAnyState& state;
  std::vector<WhenAnyChild<T>>& children;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> parent) {
    state.parent = parent;
    for (size_t i = 0; i < children.size() && state.winner == WhenAnyState::kNone; ++i) {
      children[i].start(state, i);
    }
    return --state.running != 0;
  }
  void await_resume() const noexcept {}
};

template <class T>
Task<WhenAnyResult<NonVoid<T>>> race(StopSource& stop, std::vector<Task<T>> tasks) {
  if (tasks.empty()) throw std::invalid_argument("when_any: no tasks");
  WhenAnyState state;
  state.stop = &stop;
  std::vector<WhenAnyChild<T>> children;
  children.reserve(tasks.size());
  for (auto& task : tasks) children.push_back(make_when_any_child(std::move(task)));
  co_await StartRace<T>{state, children};
  co_return WhenAnyResult<NonVoid<T>>{state.winner, children[state.winner].take()};
}

}  // namespace detail

/// The vector form. `tasks` must not be empty (std::invalid_argument).
template <class T>
Task<WhenAnyResult<detail::NonVoid<T>>> when_any(StopSource& stop, std::vector<Task<T>> tasks) {
  return detail::race(stop, std::move(tasks));
}

template <class T, class... Rest>
  requires(std::is_same_v<T, Rest> && ...)
Task<WhenAnyResult<detail::NonVoid<T>>> when_any(StopSource& stop, Task<T> first,
                                                 Task<Rest>... rest) {
  std::vector<Task<T>> tasks;
  tasks.reserve(1 + sizeof...(Rest));
  tasks.push_back(std::move(first));
  (tasks.push_back(std::move(rest)), ...);
  return detail::race(stop, std::move(tasks));
}

}  // namespace ucp
