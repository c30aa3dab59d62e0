#include "ucp/base/MpscQueue.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <semaphore>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/base/UniqueFunction.h"

namespace ucp {
namespace {

// Enough items to fill many blocks of any payload below, so that every test crosses block
// boundaries and reuses blocks the consumer handed back.
constexpr int kManyItems = 20000;

// Identifies one push: who pushed it and the how-manieth push of that producer it was.
struct Stamp {
  int producer;
  int sequence;
};

// A payload big enough (256 bytes) that a block holds only a few slots: block switches,
// and so the late-claim path, happen every dozen pushes.
struct BigStamp {
  Stamp stamp;
  std::array<char, 256 - sizeof(Stamp)> padding{};
};

TEST(MpscQueue, PopsInPushOrderOnOneThread) {
  MpscQueue<int> queue;
  EXPECT_FALSE(queue.maybe_nonempty());
  for (int i = 0; i < kManyItems; ++i) queue.push(i);
  EXPECT_TRUE(queue.maybe_nonempty());
  for (int i = 0; i < kManyItems; ++i) EXPECT_EQ(queue.pop(), i);
  EXPECT_FALSE(queue.pop().has_value());
  EXPECT_FALSE(queue.maybe_nonempty());
}

TEST(MpscQueue, MaybeNonemptyIsTrueExactlyWhileAnItemIsQueued) {
  // Step through several block boundaries one item at a time, in both directions.
  MpscQueue<BigStamp> queue;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 100; ++i) {
      queue.push(BigStamp{{0, i}});
      ASSERT_TRUE(queue.maybe_nonempty());
      auto item = queue.pop();
      ASSERT_TRUE(item.has_value());
      EXPECT_EQ(item->stamp.sequence, i);
      ASSERT_FALSE(queue.maybe_nonempty()) << "after item " << i;
    }
    for (int i = 0; i < 100; ++i) queue.push(BigStamp{{0, i}});
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(queue.maybe_nonempty());
      ASSERT_TRUE(queue.pop().has_value());
    }
    EXPECT_FALSE(queue.maybe_nonempty());
    EXPECT_FALSE(queue.pop().has_value());
  }
}

TEST(MpscQueue, MoveOnlyValuesAndLeftoversAreFreed) {
  MpscQueue<std::unique_ptr<int>> queue;
  for (int i = 0; i < kManyItems; ++i) queue.push(std::make_unique<int>(i));
  for (int i = 0; i < kManyItems / 2; ++i) {
    auto item = queue.pop();
    ASSERT_TRUE(item.has_value());
    EXPECT_EQ(**item, i);
  }
  // Half stay queued across many blocks: the destructor must free them and every block
  // (LeakSanitizer checks under `make test-asan`).
}

TEST(MpscQueue, QueuedTasksAreDestroyedNotRunWithTheQueue) {
  auto runs = std::make_shared<int>(0);
  {
    MpscQueue<UniqueFunction<void()>> queue;
    for (int i = 0; i < kManyItems; ++i) queue.push([runs] { ++*runs; });
    for (int i = 0; i < 10; ++i) (*queue.pop())();
    EXPECT_EQ(runs.use_count(), 1 + kManyItems - 10);
  }
  EXPECT_EQ(*runs, 10);
  EXPECT_EQ(runs.use_count(), 1);
}

TEST(MpscQueue, ThrowingCopyClaimsNoSlot) {
  struct Fragile {
    int value = 0;
    bool throw_on_copy = false;
    Fragile(int v, bool t) : value(v), throw_on_copy(t) {}
    Fragile(const Fragile& other) : value(other.value), throw_on_copy(other.throw_on_copy) {
      if (throw_on_copy) throw std::runtime_error("copy");
    }
    Fragile(Fragile&&) noexcept = default;
  };
  MpscQueue<Fragile> queue;
  const Fragile good(1, false);
  const Fragile bad(2, true);
  queue.push(good);
  EXPECT_THROW(queue.push(bad), std::runtime_error);
  queue.push(Fragile(3, false));
  EXPECT_EQ(queue.pop()->value, 1);
  EXPECT_EQ(queue.pop()->value, 3);  // no hole where the failed push would have been
  EXPECT_FALSE(queue.pop().has_value());
  EXPECT_FALSE(queue.maybe_nonempty());
}

// Four producers push kPerProducer stamped items each while the consumer pops. Every item
// must arrive exactly once and each producer's items in the order it pushed them.
template <class Item, class MakeItem, class StampOf>
void check_four_producers(int per_producer, MakeItem make_item, StampOf stamp_of) {
  constexpr int kProducers = 4;
  MpscQueue<Item> queue;
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < per_producer; ++i) queue.push(make_item(Stamp{p, i}));
    });
  }
  go.store(true, std::memory_order_release);
  std::vector<int> next(kProducers, 0);
  int received = 0;
  int wrong = 0;
  // Bounded: producers always make progress, so this only guards against a lost item.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (received < kProducers * per_producer && std::chrono::steady_clock::now() < deadline) {
    if (auto item = queue.pop()) {
      const Stamp stamp = stamp_of(*item);
      // A duplicate shows up as a sequence below the expected one, a loss as one above.
      if (stamp.producer < 0 || stamp.producer >= kProducers ||
          stamp.sequence != next[stamp.producer]) {
        ADD_FAILURE() << "item " << stamp.producer << "/" << stamp.sequence
                      << " out of order, lost or duplicated";
        ++wrong;
        break;
      }
      ++next[stamp.producer];
      ++received;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& t : producers) t.join();
  if (wrong != 0) return;
  EXPECT_EQ(received, kProducers * per_producer);
  EXPECT_FALSE(queue.pop().has_value());
  EXPECT_FALSE(queue.maybe_nonempty());
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], per_producer);
}

TEST(MpscQueue, FourProducersSmallItemsArriveOnceInPerProducerOrder) {
  check_four_producers<Stamp>(
      100000, [](Stamp s) { return s; }, [](const Stamp& s) { return s; });
}

TEST(MpscQueue, FourProducersBigItemsArriveOnceInPerProducerOrder) {
  check_four_producers<BigStamp>(
      50000, [](Stamp s) { return BigStamp{s}; }, [](const BigStamp& b) { return b.stamp; });
}

TEST(MpscQueue, FourProducersMoveOnlyItemsArriveOnceInPerProducerOrder) {
  check_four_producers<std::unique_ptr<Stamp>>(
      50000, [](Stamp s) { return std::make_unique<Stamp>(s); },
      [](const std::unique_ptr<Stamp>& p) { return *p; });
}

TEST(MpscQueue, FourProducersTasksRunOnceInPerProducerOrder) {
  std::vector<int> next(4, 0);  // consumer-only: the tasks run on the consumer thread
  bool in_order = true;
  check_four_producers<UniqueFunction<Stamp()>>(
      50000,
      [&](Stamp s) {
        return UniqueFunction<Stamp()>([&next, &in_order, s] {
          in_order = in_order && next[s.producer]++ == s.sequence;
          return s;
        });
      },
      [](UniqueFunction<Stamp()>& task) { return task(); });
  EXPECT_TRUE(in_order);
}

TEST(MpscQueue, PushesOrderedByHappensBeforeArriveInThatOrder) {
  // Thread A pushes (A, r) and then lets thread B go; B pushes (B, r) and lets A go on to
  // round r + 1. Slots are claimed in one order that respects happens-before, so (A, r)
  // always comes out first, although A and B are different producers.
  constexpr int kRounds = 20000;
  MpscQueue<Stamp> queue;
  std::atomic<int> a_done{-1};
  std::atomic<int> b_done{-1};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // The hand-off sleeps instead of spinning with yield(): with more runnable threads than
  // cores (a loaded machine), each yield could cost a whole time slice of another thread,
  // and 40,000 of them did not fit in the minute.
  std::mutex handoff;
  std::condition_variable turn;
  auto wait_for = [&](const std::atomic<int>& done, int round) {
    std::unique_lock lock(handoff);
    return turn.wait_until(lock, deadline,
                           [&] { return done.load(std::memory_order_acquire) >= round; });
  };
  auto finish = [&](std::atomic<int>& done, int round) {
    {
      std::lock_guard lock(handoff);
      done.store(round, std::memory_order_release);
    }
    turn.notify_all();
  };
  std::thread a([&] {
    for (int r = 0; r < kRounds && wait_for(b_done, r - 1); ++r) {
      queue.push(Stamp{0, r});
      finish(a_done, r);
    }
  });
  std::thread b([&] {
    for (int r = 0; r < kRounds && wait_for(a_done, r); ++r) {
      queue.push(Stamp{1, r});
      finish(b_done, r);
    }
  });
  std::vector<int> next(2, 0);
  int received = 0;
  int misordered = 0;
  while (received < 2 * kRounds && std::chrono::steady_clock::now() < deadline) {
    if (auto item = queue.pop()) {
      if (item->sequence != next[item->producer]++) ++misordered;
      if (item->producer == 1 && next[0] <= item->sequence) ++misordered;  // B's before A's
      ++received;
    } else {
      std::this_thread::yield();
    }
  }
  a.join();
  b.join();
  EXPECT_EQ(misordered, 0);
  EXPECT_EQ(received, 2 * kRounds);
}

// The sleep protocol EventLoop runs on this queue: a producer pushes, then flips a
// "wake pending" latch and signals only if it was the one to flip it; the consumer opens
// the latch (store false), then checks maybe_nonempty() before it sleeps. With seq_cst on
// both sides, either the consumer sees the push or the producer sees the open latch, so a
// consumer never sleeps on a non-empty queue for good. The semaphore stands in for the
// eventfd; its timeout turns a lost wake-up into a failure instead of a hang. Producers
// push in bursts and wait for the consumer between bursts, so the consumer goes to sleep
// again and again while pushes race with its check.
TEST(MpscQueue, ConsumerThatSleepsOnMaybeNonemptyMissesNoWakeUp) {
  constexpr int kProducers = 4;
  constexpr int kBursts = 1000;
  constexpr int kBurst = 20;
  constexpr int kTotal = kProducers * kBursts * kBurst;
  MpscQueue<Stamp> queue;
  std::atomic<bool> wake_pending{true};
  std::counting_semaphore<> wake(0);
  std::atomic<int> signals{0};
  std::array<std::atomic<int>, kProducers> consumed{};  // per producer, written by the consumer
  std::atomic<bool> give_up{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int burst = 0; burst < kBursts; ++burst) {
        for (int i = burst * kBurst; i < (burst + 1) * kBurst; ++i) {
          queue.push(Stamp{p, i});
          if (!wake_pending.exchange(true, std::memory_order_seq_cst)) {
            signals.fetch_add(1, std::memory_order_relaxed);
            wake.release();
          }
        }
        while (consumed[p].load(std::memory_order_acquire) < (burst + 1) * kBurst) {
          if (give_up.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
      }
    });
  }
  std::vector<int> next(kProducers, 0);
  int received = 0;
  int sleeps = 0;
  int lost_wake_ups = 0;
  int misordered = 0;
  while (received < kTotal) {
    while (auto item = queue.pop()) {
      if (item->sequence != next[item->producer]++) ++misordered;
      consumed[item->producer].store(next[item->producer], std::memory_order_release);
      ++received;
    }
    wake_pending.store(false, std::memory_order_seq_cst);
    if (queue.maybe_nonempty()) {
      std::this_thread::yield();  // a push has claimed a slot: it becomes visible soon
    } else if (received < kTotal) {
      ++sleeps;
      if (!wake.try_acquire_for(std::chrono::seconds(20))) {
        ++lost_wake_ups;
        break;
      }
    }
    wake_pending.store(true, std::memory_order_relaxed);
  }
  give_up.store(true);
  for (auto& t : producers) t.join();
  EXPECT_EQ(lost_wake_ups, 0);
  EXPECT_EQ(misordered, 0);
  EXPECT_EQ(received, kTotal);
  EXPECT_GT(sleeps, 0) << "the consumer never slept: the test did not exercise the protocol";
  EXPECT_LE(sleeps, signals.load());
}

}  // namespace
}  // namespace ucp
