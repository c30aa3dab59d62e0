// queue_micro: ucp::MpscQueue<T> against moodycamel::ConcurrentQueue and the obvious locked
// baselines, for the two payloads that matter: a move-only task (ucp::UniqueFunction<void()>,
// what EventLoop::post queues) and a small trivially copyable value (uint64_t).
//
// Each iteration moves kItemsPerIteration items from P producer threads (P = 1, 2 or 4,
// started per iteration, timing paused while they are created) to the benchmark thread,
// which is the single consumer. The consumer drains whatever is visible and yields when
// it finds nothing, the way a loop thread would go back to its ring. A task payload adds
// its number to the consumer's sum when the consumer runs it; a number is added directly.
// Wall-clock time is what counts (UseRealTime): the consumer's CPU time alone would hide
// the producers.
//
// Queues:
//   UcpMpscQueue    ucp::MpscQueue (blocks of slots, one fetch_add per push).
//   NodePerPush     the previous ucp::MpscQueue (Vyukov's node queue: one `new` per push),
//                   kept here as the reference the block queue replaced.
//   Moodycamel      moodycamel::ConcurrentQueue 1.0.3 (Debian libconcurrentqueue-dev),
//                   producers without tokens (a posting thread has none), the consumer
//                   with a ConsumerToken (its fastest single-item dequeue).
//   Bounded         ucp::BoundedMpscQueue (the logger's queue) at the logger's default
//                   capacity, 65536 cells; a producer yields while it is full.
//   MutexDeque      std::mutex + std::deque, one lock per push and one per pop.
//   MutexDequeSwap  the same push, but the consumer swaps the whole deque out under one
//                   lock (muduo's pending-functor pattern): the strongest simple rival.
//
// `per_item` is wall time divided by items moved. On a 2-core machine 1 producer + 1
// consumer already fill both cores and 2 or 4 producers + 1 consumer oversubscribe them;
// the labels say so.

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <concurrentqueue/concurrentqueue.h>

#include "ucp/base/BoundedMpscQueue.h"
#include "ucp/base/MpscQueue.h"
#include "ucp/base/UniqueFunction.h"

namespace ucp {
namespace {

constexpr uint64_t kItemsPerIteration = uint64_t{1} << 18;

// Payloads: how a producer makes item `number` and how the consumer uses it.
struct Number {
  using Type = uint64_t;
  static Type make(uint64_t number, uint64_t*) { return number; }
  static void consume(Type& item, uint64_t& sum) { sum += item; }
};

struct Task {
  using Type = UniqueFunction<void()>;
  static Type make(uint64_t number, uint64_t* sum) {
    return [sum, number] { *sum += number; };
  }
  static void consume(Type& item, uint64_t&) { item(); }
};

template <class T>
class UcpMpscQueue {
 public:
  void push(T value) { queue_.push(std::move(value)); }
  // Consumer only: takes everything visible now and hands each item to `consume`;
  // returns how many items it took.
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    uint64_t taken = 0;
    while (std::optional<T> value = queue_.pop()) {
      consume(*value);
      ++taken;
    }
    return taken;
  }

 private:
  MpscQueue<T> queue_;
};

// The MpscQueue this project used before the block queue, unchanged.
template <class T>
class NodePerPush {
 public:
  NodePerPush() : head_(new Node), tail_(head_) {}
  ~NodePerPush() {
    while (pop()) {
    }
    delete head_;
  }
  void push(T value) {
    Node* node = new Node{std::move(value)};
    Node* prev = tail_.exchange(node, std::memory_order_seq_cst);
    prev->next.store(node, std::memory_order_release);
  }
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    uint64_t taken = 0;
    while (std::optional<T> value = pop()) {
      consume(*value);
      ++taken;
    }
    return taken;
  }

 private:
  struct Node {
    std::optional<T> value;
    std::atomic<Node*> next{nullptr};
  };
  std::optional<T> pop() {
    Node* next = head_->next.load(std::memory_order_acquire);
    if (next == nullptr) return std::nullopt;
    std::optional<T> value(std::move(*next->value));
    next->value.reset();
    delete head_;
    head_ = next;
    return value;
  }
  Node* head_;
  alignas(64) std::atomic<Node*> tail_;
};

template <class T>
class Moodycamel {
 public:
  void push(T value) { queue_.enqueue(std::move(value)); }
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    uint64_t taken = 0;
    while (queue_.try_dequeue(token_, item_)) {
      consume(item_);
      ++taken;
    }
    return taken;
  }

 private:
  moodycamel::ConcurrentQueue<T> queue_;
  moodycamel::ConsumerToken token_{queue_};  // consumer-owned
  T item_{};                                 // consumer-owned: try_dequeue assigns into it
};

// The logger's fixed-capacity queue at its default capacity; a producer that finds it full
// yields and tries again (the logger's "block" policy).
template <class T>
class Bounded {
 public:
  void push(T value) {
    while (!queue_.try_push(std::move(value))) std::this_thread::yield();
  }
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    uint64_t taken = 0;
    while (queue_.try_pop_with([&consume](T& item) { consume(item); })) ++taken;
    return taken;
  }

 private:
  BoundedMpscQueue<T> queue_{65536};
};

template <class T>
class MutexDeque {
 public:
  void push(T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(value));
  }
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    uint64_t taken = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (items_.empty()) return taken;
      T value = std::move(items_.front());
      items_.pop_front();
      lock.unlock();
      consume(value);
      ++taken;
    }
  }

 private:
  std::mutex mutex_;
  std::deque<T> items_;
};

template <class T>
class MutexDequeSwap {
 public:
  void push(T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(value));
  }
  template <class Consume>
  uint64_t drain(Consume&& consume) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      taken_.swap(items_);
    }
    uint64_t taken = taken_.size();
    for (T& value : taken_) consume(value);
    taken_.clear();
    return taken;
  }

 private:
  std::mutex mutex_;
  std::deque<T> items_;
  std::deque<T> taken_;  // consumer-owned
};

void set_per_item_counters(benchmark::State& state, uint64_t items) {
  state.SetItemsProcessed(static_cast<int64_t>(items));
  // kIsRate divides by the measured time, kInvert flips it: seconds per item, scaled to ns.
  state.counters["per_item"] = benchmark::Counter(
      static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <template <class> class Queue, class Payload>
void BM_Producers(benchmark::State& state) {
  const auto producers = static_cast<uint64_t>(state.range(0));
  const uint64_t per_producer = kItemsPerIteration / producers;
  const uint64_t total = per_producer * producers;
  const uint64_t expected_sum = total * (total - 1) / 2;  // the numbers 0 .. total-1

  for (auto _ : state) {
    state.PauseTiming();
    Queue<typename Payload::Type> queue;
    uint64_t sum = 0;  // the consumer's; tasks carry a pointer to it
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    threads.reserve(producers);
    for (uint64_t p = 0; p < producers; ++p) {
      threads.emplace_back([&queue, &go, &sum, p, per_producer] {
        go.wait(false);
        const uint64_t first = p * per_producer;
        for (uint64_t i = 0; i < per_producer; ++i) queue.push(Payload::make(first + i, &sum));
      });
    }
    state.ResumeTiming();
    go.store(true);
    go.notify_all();

    uint64_t received = 0;
    while (received < total) {
      uint64_t taken = queue.drain([&sum](auto& item) { Payload::consume(item, sum); });
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
// operation (for MpscQueue: one fetch_add, a slot write and a slot read).
template <template <class> class Queue, class Payload>
void BM_SameThread(benchmark::State& state) {
  Queue<typename Payload::Type> queue;
  uint64_t sum = 0;
  uint64_t number = 0;
  for (auto _ : state) {
    queue.push(Payload::make(number++, &sum));
    benchmark::DoNotOptimize(queue.drain([&sum](auto& item) { Payload::consume(item, sum); }));
  }
  benchmark::DoNotOptimize(sum);
  set_per_item_counters(state, static_cast<uint64_t>(state.iterations()));
  state.SetLabel("push + pop on one thread");
}

#define UCP_QUEUE_BENCHMARKS(QUEUE, PAYLOAD)         \
  BENCHMARK_TEMPLATE(BM_SameThread, QUEUE, PAYLOAD); \
  BENCHMARK_TEMPLATE(BM_Producers, QUEUE, PAYLOAD)   \
      ->ArgName("producers")                         \
      ->Arg(1)                                       \
      ->Arg(2)                                       \
      ->Arg(4)                                       \
      ->UseRealTime()                                \
      ->Unit(benchmark::kMillisecond)

UCP_QUEUE_BENCHMARKS(UcpMpscQueue, Task);
UCP_QUEUE_BENCHMARKS(Moodycamel, Task);
UCP_QUEUE_BENCHMARKS(Bounded, Task);
UCP_QUEUE_BENCHMARKS(MutexDeque, Task);
UCP_QUEUE_BENCHMARKS(MutexDequeSwap, Task);
UCP_QUEUE_BENCHMARKS(NodePerPush, Task);
UCP_QUEUE_BENCHMARKS(UcpMpscQueue, Number);
UCP_QUEUE_BENCHMARKS(Moodycamel, Number);
UCP_QUEUE_BENCHMARKS(Bounded, Number);
UCP_QUEUE_BENCHMARKS(MutexDeque, Number);
UCP_QUEUE_BENCHMARKS(MutexDequeSwap, Number);
UCP_QUEUE_BENCHMARKS(NodePerPush, Number);

}  // namespace
}  // namespace ucp
