// task_micro: what a coroutine costs in UCP.
//
//   TaskCreateRunDestroy   call a Task<int> coroutine, resume it to completion, read the
//                          result, destroy the frame (pool frame allocate + free included).
//   TaskChain/10           a root task awaiting a chain 10 deep (11 frames, 10 awaits, each
//                          completion a symmetric transfer back to its awaiter).
//   HeapTask*              the same two with a task type identical except that its frames
//                          come from operator new: what the pool saves per frame.
//   SpawnCompletes         SpawnGroup::spawn of a Task<> that finishes at once (task frame +
//                          detached wrapper frame, link, run, unlink, both freed).
//   SpawnParkResume/1000   spawn 1000 tasks that each suspend (like a connection waiting
//                          for a CQE), then resume them all: the per-connection lifecycle.
// Single thread; `per_item` is the time per task, per await or per spawn, as named.

#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/Task.h"

namespace ucp {
namespace {

void set_per_item_counters(benchmark::State& state, uint64_t items) {
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.counters["per_item"] = benchmark::Counter(
      static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Drives a task from plain code: resume until its final suspend, then take the value.
// A null continuation makes the final awaiter return noop_coroutine, so resume() returns.
template <class TaskType>
int run_to_completion(TaskType task) {
  auto handle = task.release();
  handle.resume();
  int value = *handle.promise().result;
  handle.destroy();
  return value;
}

// ---- ucp::Task (pool frames) ----

Task<int> leaf(int value) { co_return value; }

Task<int> chain(int depth) {
  if (depth == 0) co_return 1;
  int below = co_await chain(depth - 1);
  co_return below + 1;
}

// ---- HeapTask: ucp::Task's shape, frames from the global heap (baseline only) ----

class [[nodiscard]] HeapTask {
 public:
  struct promise_type {
    struct FinalAwaiter {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        auto continuation = self.promise().continuation;
        return continuation ? continuation : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    HeapTask get_return_object() noexcept { return HeapTask{Handle::from_promise(*this)}; }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    FinalAwaiter final_suspend() const noexcept { return {}; }
    void unhandled_exception() noexcept { exception = std::current_exception(); }
    void return_value(int value) noexcept { result.emplace(value); }

    std::coroutine_handle<> continuation;
    std::exception_ptr exception;
    std::optional<int> result;
  };
  using Handle = std::coroutine_handle<promise_type>;

  HeapTask(HeapTask&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  HeapTask& operator=(HeapTask&&) = delete;
  ~HeapTask() {
    if (handle_) handle_.destroy();
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) noexcept {
    handle_.promise().continuation = caller;
    return handle_;
  }
  int await_resume() const {
    if (handle_.promise().exception) std::rethrow_exception(handle_.promise().exception);
    return *handle_.promise().result;
  }
  Handle release() noexcept { return std::exchange(handle_, {}); }

 private:
  explicit HeapTask(Handle handle) noexcept : handle_(handle) {}
  Handle handle_;
};

HeapTask heap_leaf(int value) { co_return value; }

HeapTask heap_chain(int depth) {
  if (depth == 0) co_return 1;
  int below = co_await heap_chain(depth - 1);
  co_return below + 1;
}

// ---- benchmarks ----

void BM_TaskCreateRunDestroy(benchmark::State& state) {
  int value = 42;
  for (auto _ : state) {
    benchmark::DoNotOptimize(value);
    benchmark::DoNotOptimize(run_to_completion(leaf(value)));
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()));
}

void BM_HeapTaskCreateRunDestroy(benchmark::State& state) {
  int value = 42;
  for (auto _ : state) {
    benchmark::DoNotOptimize(value);
    benchmark::DoNotOptimize(run_to_completion(heap_leaf(value)));
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()));
}

// per_item here is per await (depth awaits per iteration).
void BM_TaskChain(benchmark::State& state) {
  auto depth = static_cast<int>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(depth);
    if (run_to_completion(chain(depth)) != depth + 1) {
      state.SkipWithError("chain returned the wrong value");
      break;
    }
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations() * state.range(0)));
}

void BM_HeapTaskChain(benchmark::State& state) {
  auto depth = static_cast<int>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(depth);
    if (run_to_completion(heap_chain(depth)) != depth + 1) {
      state.SkipWithError("chain returned the wrong value");
      break;
    }
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations() * state.range(0)));
}

Task<> count_up(uint64_t& counter) {
  ++counter;
  co_return;
}

void BM_SpawnCompletes(benchmark::State& state) {
  SpawnGroup group;
  uint64_t counter = 0;
  for (auto _ : state) group.spawn(count_up(counter));
  if (counter != static_cast<uint64_t>(state.iterations()) || group.size() != 0) {
    state.SkipWithError("spawned tasks did not all run and finish");
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()));
}

// Stands in for a CQE: the task parks its handle here and the benchmark resumes it.
struct Park {
  std::vector<std::coroutine_handle<>>* parked;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> waiter) const { parked->push_back(waiter); }
  void await_resume() const noexcept {}
};

Task<> park_then_count(std::vector<std::coroutine_handle<>>& parked, uint64_t& counter) {
  co_await Park{&parked};
  ++counter;
}

void BM_SpawnParkResume(benchmark::State& state) {
  const auto batch = static_cast<size_t>(state.range(0));
  SpawnGroup group;
  std::vector<std::coroutine_handle<>> parked;
  parked.reserve(batch);
  uint64_t counter = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < batch; ++i) group.spawn(park_then_count(parked, counter));
    for (std::coroutine_handle<> handle : parked) handle.resume();
    parked.clear();
  }
  if (counter != static_cast<uint64_t>(state.iterations()) * batch || group.size() != 0) {
    state.SkipWithError("spawned tasks did not all run and finish");
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()) * batch);
}

BENCHMARK(BM_TaskCreateRunDestroy);
BENCHMARK(BM_HeapTaskCreateRunDestroy);
BENCHMARK(BM_TaskChain)->ArgName("depth")->Arg(10);
BENCHMARK(BM_HeapTaskChain)->ArgName("depth")->Arg(10);
BENCHMARK(BM_SpawnCompletes);
BENCHMARK(BM_SpawnParkResume)->ArgName("tasks")->Arg(1000);

}  // namespace
}  // namespace ucp
