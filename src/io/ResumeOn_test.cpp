// resume_on: a coroutine moves between loop threads and does I/O on each.

#include "ucp/io/ResumeOn.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/Operations.h"

#include "LoopThread.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using test::LoopThread;

struct Trace {
  std::thread::id started, on_b, back_on_a;
  bool slept_on_b = false;
  int hops = 0;
};

Task<> hop(EventLoop& a, EventLoop& b, Trace& trace) {
  trace.started = std::this_thread::get_id();
  co_await resume_on(b);
  trace.on_b = std::this_thread::get_id();
  trace.slept_on_b = static_cast<bool>(co_await io::sleep_for(b, 1ms));  // b's timers
  co_await resume_on(a);
  trace.back_on_a = std::this_thread::get_id();
  for (int i = 0; i < 1000; ++i) {  // ping-pong: frames are freed on the other thread too
    co_await resume_on(i % 2 == 0 ? b : a);
    ++trace.hops;
  }
  co_await resume_on(a);
}

TEST(ResumeOn, MovesACoroutineToAnotherLoopAndBack) {
  auto a = std::make_unique<LoopThread>();
  auto b = std::make_unique<LoopThread>();
  Trace trace;
  b->start([](EventLoop& l) -> Task<> {
    co_await io::sleep_for(l, 1h);  // keeps b running until it is stopped
  }(b->loop()));
  a->start(hop(a->loop(), b->loop(), trace));
  std::vector<LoopThread*> wait{a.get()};
  const bool finished = test::wait_all_finished(wait, std::chrono::seconds(30));
  a->stop_and_join();
  b->stop_and_join();
  ASSERT_TRUE(finished);
  EXPECT_NE(trace.started, trace.on_b);
  EXPECT_EQ(trace.started, trace.back_on_a);
  EXPECT_TRUE(trace.slept_on_b);
  EXPECT_EQ(trace.hops, 1000);
}

TEST(ResumeOn, OnTheTargetsOwnThreadItDoesNotSuspend) {
  auto a = std::make_unique<LoopThread>();
  std::atomic<bool> same_thread{false};
  a->start([](EventLoop& l, std::atomic<bool>& same) -> Task<> {
    const auto before = std::this_thread::get_id();
    co_await resume_on(l);
    same.store(before == std::this_thread::get_id() && l.in_loop_thread());
  }(a->loop(), same_thread));
  std::vector<LoopThread*> wait{a.get()};
  EXPECT_TRUE(test::wait_all_finished(wait, std::chrono::seconds(30)));
  a->stop_and_join();
  EXPECT_TRUE(same_thread.load());
}

}  // namespace
}  // namespace ucp
