#include "ucp/base/BoundedMpscQueue.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(BoundedMpscQueue, RoundsCapacityUpToPowerOfTwo) {
  EXPECT_EQ(BoundedMpscQueue<int>(1).capacity(), 2u);
  EXPECT_EQ(BoundedMpscQueue<int>(5).capacity(), 8u);
  EXPECT_EQ(BoundedMpscQueue<int>(64).capacity(), 64u);
}

TEST(BoundedMpscQueue, PopsInPushOrder) {
  BoundedMpscQueue<int> queue(8);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(queue.try_push(i));
  for (int i = 0; i < 5; ++i) {
    auto value = queue.try_pop();
    ASSERT_TRUE(value.has_value());
    EXPECT_EQ(*value, i);
  }
  EXPECT_FALSE(queue.try_pop().has_value());
}

TEST(BoundedMpscQueue, RejectsPushWhenFullAndAcceptsAfterPop) {
  BoundedMpscQueue<int> queue(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(queue.try_push(i));
  EXPECT_FALSE(queue.try_push(99));
  EXPECT_EQ(queue.size_approx(), 4u);
  EXPECT_EQ(*queue.try_pop(), 0);
  EXPECT_TRUE(queue.try_push(4));
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(*queue.try_pop(), i);
  EXPECT_FALSE(queue.claimed_unread());
}

TEST(BoundedMpscQueue, WrapsAroundManyLaps) {
  BoundedMpscQueue<uint64_t> queue(4);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(queue.try_push(i));
    ASSERT_TRUE(queue.try_push(i + 1));
    EXPECT_EQ(*queue.try_pop(), i);
    EXPECT_EQ(*queue.try_pop(), i + 1);
  }
  EXPECT_EQ(queue.popped_count(), 2000u);
}

TEST(BoundedMpscQueue, FillsAndConsumesSlotsInPlace) {
  struct Slot {
    std::array<char, 32> text{};
    size_t size = 0;
  };
  BoundedMpscQueue<Slot> queue(2);
  size_t position = 99;
  ASSERT_TRUE(queue.try_push_with(
      [](Slot& slot) {
        std::string_view hello = "hello";
        hello.copy(slot.text.data(), hello.size());
        slot.size = hello.size();
      },
      &position));
  EXPECT_EQ(position, 0u);
  std::string seen;
  EXPECT_TRUE(queue.try_pop_with([&](Slot& slot) { seen.assign(slot.text.data(), slot.size); }));
  EXPECT_EQ(seen, "hello");
  EXPECT_GT(queue.popped_count(), position);
}

// Producers race through a small queue (many full/empty transitions): every value arrives
// exactly once and each producer's values arrive in the order it pushed them.
TEST(BoundedMpscQueue, ManyProducersLoseNothingAndKeepPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr uint32_t kPerProducer = 50000;
  BoundedMpscQueue<uint64_t> queue(64);
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (uint64_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&queue, &go, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        while (!queue.try_push((p << 32) | i)) std::this_thread::yield();
      }
    });
  }
  go.store(true, std::memory_order_release);
  std::array<uint64_t, kProducers> next{};
  uint64_t received = 0;
  bool in_order = true;
  while (received < uint64_t{kProducers} * kPerProducer) {
    auto value = queue.try_pop();
    if (!value) {
      std::this_thread::yield();
      continue;
    }
    auto producer = *value >> 32;
    auto index = *value & 0xffffffffu;
    in_order = in_order && producer < kProducers && index == next[producer];
    if (producer < kProducers) next[producer] = index + 1;
    ++received;
  }
  for (auto& thread : producers) thread.join();
  EXPECT_TRUE(in_order);
  for (auto n : next) EXPECT_EQ(n, kPerProducer);
  EXPECT_FALSE(queue.try_pop().has_value());
  EXPECT_FALSE(queue.claimed_unread());
}

}  // namespace
}  // namespace ucp
