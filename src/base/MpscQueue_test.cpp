#include "ucp/base/MpscQueue.h"

#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ucp {
namespace {

TEST(MpscQueue, PopsInPushOrderOnOneThread) {
  MpscQueue<int> queue;
  EXPECT_FALSE(queue.maybe_nonempty());
  for (int i = 0; i < 100; ++i) queue.push(i);
  EXPECT_TRUE(queue.maybe_nonempty());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(queue.pop(), i);
  EXPECT_FALSE(queue.pop().has_value());
  EXPECT_FALSE(queue.maybe_nonempty());
}

TEST(MpscQueue, MoveOnlyValuesAndLeftoversAreFreed) {
  MpscQueue<std::unique_ptr<int>> queue;
  queue.push(std::make_unique<int>(7));
  queue.push(std::make_unique<int>(8));
  auto first = queue.pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(**first, 7);
  // The second stays queued: the destructor must free it (LeakSanitizer checks).
}

TEST(MpscQueue, FourProducersExactCountsAndPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 200000;
  MpscQueue<std::pair<int, int>> queue;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&queue, p] {
      for (int i = 0; i < kPerProducer; ++i) queue.push({p, i});
    });
  }
  std::vector<int> next(kProducers, 0);
  int received = 0;
  while (received < kProducers * kPerProducer) {
    if (auto item = queue.pop()) {
      auto [producer, sequence] = *item;
      ASSERT_EQ(sequence, next[producer]) << "producer " << producer << " out of order";
      ++next[producer];
      ++received;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(queue.pop().has_value());
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

}  // namespace
}  // namespace ucp
