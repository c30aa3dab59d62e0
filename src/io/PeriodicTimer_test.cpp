// PeriodicTimer: deadlines at first + k * period whatever the work between ticks costs, missed
// ticks counted instead of replayed, and the ways a tick ends early.

#include "ucp/io/PeriodicTimer.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"

#include "LoopRunner.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using test::make_loop;
using test::run_to_end;

TEST(PeriodicTimer, DeadlinesStayOnTheGridWhateverTheWorkInBetweenCosts) {
  auto loop = make_loop();
  const Clock::time_point first = Clock::now() + 5ms;
  std::vector<uint64_t> counts;
  std::vector<Clock::time_point> resumed;
  run_to_end(*loop,
             [](EventLoop& l, Clock::time_point start, std::vector<uint64_t>& out,
                std::vector<Clock::time_point>& at) -> Task<> {
               PeriodicTimer timer(l, 10ms, start);
               uint64_t total = 0;
               for (int i = 0; i < 6; ++i) {
                 auto ticks = co_await timer.tick();
                 EXPECT_TRUE(ticks);
                 if (!ticks) co_return;
                 at.push_back(Clock::now());
                 out.push_back(*ticks);
                 total += *ticks;
                 // The next deadline is on the grid, counted from the first, not from now.
                 EXPECT_EQ(timer.next_due(), start + 10ms * static_cast<int64_t>(total));
                 co_await io::sleep_for(l, 3ms);  // work that takes a while
               }
             }(*loop, first, counts, resumed));
  ASSERT_EQ(counts.size(), 6u);
  Clock::time_point due = first;
  for (size_t i = 0; i < counts.size(); ++i) {
    EXPECT_GE(counts[i], 1u);
    due += 10ms * static_cast<int64_t>(counts[i] - 1);
    EXPECT_GE(resumed[i], due) << "tick " << i << " came before its deadline";
    due += 10ms;
  }
}

TEST(PeriodicTimer, ACoroutineThatComesLateGetsOneTickCountingTheMissedOnes) {
  auto loop = make_loop();
  uint64_t late_ticks = 0;
  Clock::time_point next{};
  Clock::time_point before{};
  run_to_end(*loop,
             [](EventLoop& l, uint64_t& late, Clock::time_point& next_due,
                Clock::time_point& asked) -> Task<> {
               PeriodicTimer timer(l, 5ms);
               EXPECT_GE((co_await timer.tick()).value_or(0), 1u);
               // Now the next deadline is at most one period ahead. The loop is blocked for 30 ms:
               // at least 6 deadlines pass.
               std::this_thread::sleep_for(30ms);
               asked = Clock::now();
               auto ticks = co_await timer.tick();  // ready at once
               late = ticks.value_or(0);
               next_due = timer.next_due();
             }(*loop, late_ticks, next, before));
  EXPECT_GE(late_ticks, 6u);
  EXPECT_GT(next, before);  // the next deadline is one not yet passed
}

TEST(PeriodicTimer, StopEndsTheWaitingTickAndEveryLaterOne) {
  auto loop = make_loop();
  std::vector<std::error_code> errors;
  run_to_end(*loop, [](EventLoop& l, std::vector<std::error_code>& out) -> Task<> {
    PeriodicTimer timer(l, 1h);
    l.spawn([](EventLoop& l2, PeriodicTimer& t) -> Task<> {
      co_await io::sleep_for(l2, 5ms);
      t.stop();
    }(l, timer));
    out.push_back((co_await timer.tick()).error());
    out.push_back((co_await timer.tick()).error());
    EXPECT_TRUE(timer.stopped());
  }(*loop, errors));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], std::errc::operation_canceled);
  EXPECT_EQ(errors[1], std::errc::operation_canceled);
  EXPECT_EQ(loop->armed_timers(), 0u);
}

TEST(PeriodicTimer, ACancelledTickLeavesTheTimerTicking) {
  auto loop = make_loop();
  std::error_code cancelled;
  uint64_t later = 0;
  run_to_end(*loop, [](EventLoop& l, std::error_code& first, uint64_t& second) -> Task<> {
    PeriodicTimer timer(l, 20ms);
    StopSource stop;
    stop.request_stop();
    first = (co_await with_stop(timer.tick(), stop.token())).error();
    second = (co_await with_timeout(timer.tick(), 10s)).value_or(0);
  }(*loop, cancelled, later));
  EXPECT_EQ(cancelled, std::errc::operation_canceled);
  EXPECT_GE(later, 1u);
}

TEST(PeriodicTimer, DestroyingTheTimerEndsAWaitingTick) {
  auto loop = make_loop();
  std::error_code error;
  run_to_end(*loop, [](EventLoop& l, std::error_code& out) -> Task<> {
    auto timer = std::make_unique<PeriodicTimer>(l, 1h);
    l.spawn([](EventLoop& l2, std::unique_ptr<PeriodicTimer>& t) -> Task<> {
      co_await io::sleep_for(l2, 5ms);
      t.reset();
    }(l, timer));
    out = (co_await timer->tick()).error();
  }(*loop, error));
  EXPECT_EQ(error, std::errc::operation_canceled);
}

}  // namespace
}  // namespace ucp
