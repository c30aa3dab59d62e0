// LoopOptions::busy_poll_us on both backends: a loop that would sleep spins for completions
// instead, and the loop's counters (LoopStats::busy_polls, busy_poll_hits) show it. The spin
// windows are far longer than anything here takes (seconds), so the counts are exact: only
// a spin that runs out its whole window counts as a miss, and none should.

#include <array>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"

#include "Backends.h"
#include "SocketPair.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kLongSpinUs = 60'000'000;  // 60 s: never runs out in these tests

std::unique_ptr<EventLoop> make_loop(BackendKind backend, uint32_t busy_poll_us) {
  LoopOptions options;
  options.backend = backend;
  options.busy_poll_us = busy_poll_us;
  auto loop = EventLoop::create(options);
  if (!loop) {
    ADD_FAILURE() << EventLoop::describe_setup_error(loop.error(), options);
    return nullptr;
  }
  return std::move(*loop);
}

class BusyPoll : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
};

// The loop answers `rounds` one-byte messages from a peer thread, one at a time: each wait for
// the next message (and for each answer's send) is a moment the loop would otherwise sleep.
void ping_pong(EventLoop& loop, int rounds) {
  test::SocketPair pair;
  std::thread peer([fd = pair.a.get(), rounds] {
    for (int i = 0; i < rounds; ++i) {
      const char out = static_cast<char>('a' + i % 26);
      ASSERT_EQ(::send(fd, &out, 1, MSG_NOSIGNAL), 1);
      pollfd p{fd, POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, 30000), 1) << "no answer to message " << i;
      char in = 0;
      ASSERT_EQ(::recv(fd, &in, 1, 0), 1);
      ASSERT_EQ(in, out);
    }
  });
  loop.spawn([](EventLoop& l, int fd, int n) -> Task<> {
    for (int i = 0; i < n; ++i) {
      std::array<std::byte, 1> byte;
      auto got = co_await io::recv(l, fd, byte);
      EXPECT_TRUE(got && *got == 1);
      auto sent = co_await io::send(l, fd, byte);
      EXPECT_TRUE(sent && *sent == 1);
    }
    l.stop();
  }(loop, pair.b.get(), rounds));
  loop.run();
  peer.join();
}

TEST_P(BusyPoll, CompletionsArriveWhileTheLoopSpinsInsteadOfSleeping) {
  auto loop = make_loop(GetParam(), kLongSpinUs);
  ASSERT_TRUE(loop);
  constexpr int kRounds = 50;
  ping_pong(*loop, kRounds);
  const LoopStats& stats = loop->stats();
  // At least one spin per message (the wait for it), each ended by its completion.
  EXPECT_GE(stats.busy_polls, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(stats.busy_poll_hits, stats.busy_polls);
  EXPECT_NE(loop->describe().find("busy_poll_us=60000000 napi_busy_poll="), std::string::npos)
      << loop->describe();
}

TEST_P(BusyPoll, OffByDefault) {
  auto loop = make_loop(GetParam(), 0);
  ASSERT_TRUE(loop);
  ping_pong(*loop, 10);
  EXPECT_EQ(loop->stats().busy_polls, 0u);
  EXPECT_EQ(loop->stats().busy_poll_hits, 0u);
  EXPECT_FALSE(loop->capabilities().napi_busy_poll);
  EXPECT_NE(loop->describe().find("busy_poll=off"), std::string::npos) << loop->describe();
}

TEST_P(BusyPoll, ASpinEndsWhenATimerIsDue) {
  auto loop = make_loop(GetParam(), kLongSpinUs);
  ASSERT_TRUE(loop);
  int slept = 0;
  loop->spawn([](EventLoop& l, int& count) -> Task<> {
    for (int i = 0; i < 5; ++i) {
      if (co_await io::sleep_for(l, 1ms)) ++count;
    }
    l.stop();
  }(*loop, slept));
  loop->run();
  EXPECT_EQ(slept, 5);
  // Each sleep ended a spin when it came due; a spin that ignored the timer would run out its
  // 60 s and count as a miss.
  EXPECT_GE(loop->stats().busy_polls, 5u);
  EXPECT_EQ(loop->stats().busy_poll_hits, loop->stats().busy_polls);
}

TEST_P(BusyPoll, ASpinningLoopSeesPostsWithoutAnEventfdWrite) {
  auto loop = make_loop(GetParam(), kLongSpinUs);
  ASSERT_TRUE(loop);
  std::promise<void> running;
  loop->post([&running] { running.set_value(); });
  std::thread thread([&] { loop->run(); });
  ASSERT_EQ(running.get_future().wait_for(30s), std::future_status::ready);
  // The loop spins from here on (nothing else to do): it never opens its wake-up latch, so
  // these posts and the stop need no eventfd write.
  std::promise<void> done;
  for (int i = 0; i < 10; ++i) loop->post([] {});
  loop->post([&done] { done.set_value(); });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready);
  loop->stop();
  thread.join();
  EXPECT_EQ(loop->wakeups_written(), 0u);
  EXPECT_GE(loop->stats().busy_poll_hits, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, BusyPoll, test::kAllBackends, test::backend_name);

}  // namespace
}  // namespace ucp
