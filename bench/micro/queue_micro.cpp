// queue_micro: ucp::MpscQueue<T> against the obvious locked baselines.
//
// Each iteration moves kItemsPerIteration integers from P producer threads (P = 1 or 3,
// started per iteration, timing paused while they are created) to the benchmark thread,
// which is the single consumer. The consumer drains whatever is visible and yields when
// it finds nothing, the way a loop thread would go back to its ring. Wall-clock time is
// what counts (UseRealTime): the consumer's CPU time alone would hide the producers.
//
// Baselines:
//   MutexDeque      std::mutex + std::deque, one lock per push and one per pop.
//   MutexDequeSwap  the same push, but the consumer swaps the whole deque out under one
//                   lock (muduo's pending-functor pattern): the strongest simple rival.
//
// `per_item` is wall time divided by items moved. On a 2-core machine 1 producer + 1
// consumer already fill both cores and 3 + 1 oversubscribe them; the labels say so.

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "ucp/base/MpscQueue.h"

namespace ucp {
namespace {

constexpr uint64_t kItemsPerIteration = uint64_t{1} << 18;

class LockFree {
 public:
  void push(uint64_t value) { queue_.push(value); }
  // Consumer only: takes everything visible now; returns how many items it took.
  uint64_t drain(uint64_t& sum) {
    uint64_t taken = 0;
    while (std::optional<uint64_t> value = queue_.pop()) {
      sum += *value;
      ++taken;
    }
    return taken;
  }

 private:
  MpscQueue<uint64_t> queue_;
};

class MutexDeque {
 public:
  void push(uint64_t value) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(value);
  }
  uint64_t drain(uint64_t& sum) {
    uint64_t taken = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (items_.empty()) return taken;
      uint64_t value = items_.front();
      items_.pop_front();
      lock.unlock();
      sum += value;
      ++taken;
    }
  }

 private:
  std::mutex mutex_;
  std::deque<uint64_t> items_;
};

class MutexDequeSwap {
 public:
  void push(uint64_t value) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(value);
  }
  uint64_t drain(uint64_t& sum) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      taken_.swap(items_);
    }
    uint64_t taken = taken_.size();
    for (uint64_t value : taken_) sum += value;
    taken_.clear();
    return taken;
  }

 private:
  std::mutex mutex_;
  std::deque<uint64_t> items_;
  std::deque<uint64_t> taken_;  // consumer-owned
};

void set_per_item_counters(benchmark::State& state, uint64_t items) {
  state.SetItemsProcessed(static_cast<int64_t>(items));
  // kIsRate divides by the measured time, kInvert flips it: seconds per item, scaled to ns.
  state.counters["per_item"] = benchmark::Counter(
      static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class Queue>
void BM_Producers(benchmark::State& state) {
  const auto producers = static_cast<uint64_t>(state.range(0));
  const uint64_t per_producer = kItemsPerIteration / producers;
  const uint64_t total = per_producer * producers;
  uint64_t expected_sum = 0;
  for (uint64_t p = 0; p < producers; ++p) {
    for (uint64_t i = 0; i < per_producer; ++i) expected_sum += p * per_producer + i;
  }

  for (auto _ : state) {
    state.PauseTiming();
    Queue queue;
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    threads.reserve(producers);
    for (uint64_t p = 0; p < producers; ++p) {
      threads.emplace_back([&queue, &go, p, per_producer] {
        go.wait(false);
        const uint64_t first = p * per_producer;
        for (uint64_t i = 0; i < per_producer; ++i) queue.push(first + i);
      });
    }
    state.ResumeTiming();
    go.store(true);
    go.notify_all();

    uint64_t received = 0;
    uint64_t sum = 0;
    while (received < total) {
      uint64_t taken = queue.drain(sum);
      received += taken;
      if (taken == 0) std::this_thread::yield();
    }
    for (std::thread& thread : threads) thread.join();
    if (sum != expected_sum) {
      state.SkipWithError("consumer lost or duplicated items");
      break;
    }
  }
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()) * total);
  state.SetLabel(producers == 1 ? "2 cores: 1 producer + 1 consumer"
                                : "2 cores, oversubscribed: " + std::to_string(producers) +
                                      " producers + 1 consumer");
}

// No contention at all: one thread pushes and pops one item. This is the fixed cost of an
// operation (for MpscQueue: one node new + delete and the atomic exchange).
template <class Queue>
void BM_SameThread(benchmark::State& state) {
  Queue queue;
  uint64_t sum = 0;
  uint64_t value = 0;
  for (auto _ : state) {
    queue.push(value++);
    benchmark::DoNotOptimize(queue.drain(sum));
  }
  benchmark::DoNotOptimize(sum);
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()));
  state.SetLabel("2 cores: push + pop on one thread");
}

BENCHMARK_TEMPLATE(BM_SameThread, LockFree);
BENCHMARK_TEMPLATE(BM_SameThread, MutexDeque);
BENCHMARK_TEMPLATE(BM_SameThread, MutexDequeSwap);

BENCHMARK_TEMPLATE(BM_Producers, LockFree)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_Producers, MutexDeque)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_Producers, MutexDequeSwap)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ucp
