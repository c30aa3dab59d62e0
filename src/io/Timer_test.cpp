// The loop's timer heap on its own: order, cancellation, moving timers later (lazily) and
// earlier, and callbacks that add or cancel timers while the heap fires. Time is simulated:
// fire_due() is given the "now" to fire at, so nothing here depends on the wall clock.

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/detail/TimerQueue.h"

namespace ucp::detail {
namespace {

using namespace std::chrono_literals;

const Clock::time_point kStart{};

struct Recorded : TimerNode {
  explicit Recorded(int name, std::vector<int>* log) : TimerNode(&record), id(name), out(log) {}
  static void record(TimerNode& node) noexcept {
    auto& self = static_cast<Recorded&>(node);
    self.out->push_back(self.id);
  }
  int id;
  std::vector<int>* out;
};

TEST(TimerQueue, FiresInDueOrderOnlyWhenDue) {
  TimerQueue queue;
  std::vector<int> fired;
  Recorded a(1, &fired), b(2, &fired), c(3, &fired);
  queue.add(b, kStart + 20ms);
  queue.add(c, kStart + 30ms);
  queue.add(a, kStart + 10ms);
  EXPECT_EQ(queue.next_key(), kStart + 10ms);
  EXPECT_EQ(queue.fire_due(kStart + 9ms), 0u);
  EXPECT_EQ(queue.fire_due(kStart + 20ms), 2u);
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  EXPECT_EQ(queue.fire_due(kStart + 1s), 1u);
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_FALSE(a.armed());
}

TEST(TimerQueue, CancelledTimersNeverFire) {
  TimerQueue queue;
  std::vector<int> fired;
  Recorded a(1, &fired), b(2, &fired);
  queue.add(a, kStart + 10ms);
  queue.add(b, kStart + 10ms);
  queue.cancel(a);
  EXPECT_FALSE(a.armed());
  EXPECT_EQ(queue.armed(), 1u);
  queue.fire_due(kStart + 1s);
  EXPECT_EQ(fired, (std::vector<int>{2}));
  EXPECT_EQ(queue.size(), 0u);  // the lazily cancelled entry left the heap too
}

TEST(TimerQueue, MovingATimerLaterKeepsItsEntryAndFiresAtTheNewTime) {
  TimerQueue queue;
  std::vector<int> fired;
  Recorded a(1, &fired);
  queue.add(a, kStart + 10ms);
  for (int i = 1; i <= 100; ++i) queue.add(a, kStart + 10ms + i * 1ms);  // O(1) each
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.fire_due(kStart + 50ms), 0u);  // its old key came up: re-queued, not fired
  EXPECT_TRUE(a.armed());
  EXPECT_EQ(queue.fire_due(kStart + 110ms), 1u);
  EXPECT_EQ(fired, (std::vector<int>{1}));
}

TEST(TimerQueue, MovingATimerEarlierFiresItEarlier) {
  TimerQueue queue;
  std::vector<int> fired;
  Recorded a(1, &fired), b(2, &fired);
  queue.add(a, kStart + 50ms);
  queue.add(b, kStart + 40ms);
  queue.add(a, kStart + 5ms);
  EXPECT_EQ(queue.next_key(), kStart + 5ms);
  queue.fire_due(kStart + 45ms);
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
}

TEST(TimerQueue, DestroyingAQueuedTimerRemovesIt) {
  TimerQueue queue;
  std::vector<int> fired;
  Recorded keep(1, &fired);
  queue.add(keep, kStart + 30ms);
  {
    Recorded gone(2, &fired);
    queue.add(gone, kStart + 10ms);
  }
  EXPECT_EQ(queue.size(), 1u);
  queue.fire_due(kStart + 1s);
  EXPECT_EQ(fired, (std::vector<int>{1}));
}

// A callback re-arms its own timer (a periodic timer) and cancels another.
struct Periodic : TimerNode {
  Periodic(TimerQueue& q, Clock::time_point* clock) : TimerNode(&tick), queue(q), now(clock) {}
  static void tick(TimerNode& node) noexcept {
    auto& self = static_cast<Periodic&>(node);
    ++self.ticks;
    if (self.victim != nullptr) self.queue.cancel(*self.victim);
    if (self.ticks < 5) self.queue.add(self, *self.now + 10ms);
  }
  TimerQueue& queue;
  Clock::time_point* now;
  TimerNode* victim = nullptr;
  int ticks = 0;
};

TEST(TimerQueue, CallbacksMayRearmThemselvesAndCancelOthers) {
  TimerQueue queue;
  Clock::time_point now = kStart;
  Periodic periodic(queue, &now);
  std::vector<int> fired;
  Recorded victim(9, &fired);
  periodic.victim = &victim;
  queue.add(periodic, kStart + 10ms);
  queue.add(victim, kStart + 15ms);
  for (int step = 1; step <= 10; ++step) {
    now = kStart + step * 10ms;
    queue.fire_due(now);
  }
  EXPECT_EQ(periodic.ticks, 5);
  EXPECT_TRUE(fired.empty());
  EXPECT_EQ(queue.size(), 0u);
}

TEST(TimerQueue, TenThousandRandomTimersFireInNondecreasingDueOrder) {
  TimerQueue queue;
  std::mt19937 rng(42);
  std::vector<int> fired;
  std::vector<std::unique_ptr<Recorded>> timers;
  std::vector<Clock::time_point> due(10000);
  for (int i = 0; i < 10000; ++i) {
    timers.push_back(std::make_unique<Recorded>(i, &fired));
    due[static_cast<size_t>(i)] = kStart + std::chrono::microseconds(rng() % 1'000'000);
    queue.add(*timers.back(), due[static_cast<size_t>(i)]);
  }
  // Move a third later, cancel a tenth.
  for (int i = 0; i < 10000; i += 3) {
    due[static_cast<size_t>(i)] += std::chrono::microseconds(rng() % 500'000);
    queue.add(*timers[static_cast<size_t>(i)], due[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < 10000; i += 10) queue.cancel(*timers[static_cast<size_t>(i)]);
  for (int ms = 0; ms <= 1600; ++ms) queue.fire_due(kStart + std::chrono::milliseconds(ms));
  EXPECT_EQ(fired.size(), 9000u);
  for (size_t i = 1; i < fired.size(); ++i) {
    // Fired within the same millisecond step may come in any order; across steps, in order.
    auto previous = due[static_cast<size_t>(fired[i - 1])];
    auto current = due[static_cast<size_t>(fired[i])];
    EXPECT_LE(std::chrono::floor<std::chrono::milliseconds>(previous - kStart),
              std::chrono::ceil<std::chrono::milliseconds>(current - kStart))
        << i;
  }
  for (int id : fired) EXPECT_NE(id % 10, 0);
  EXPECT_EQ(queue.size(), 0u);
}

}  // namespace
}  // namespace ucp::detail
