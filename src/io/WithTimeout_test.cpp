// with_timeout / with_stop over real operations on a loop: the deadline or the stop cancels the
// operation, the coroutine resumes after its completion, and an operation that completes first
// keeps its result.

#include "ucp/io/WithTimeout.h"

#include <array>
#include <chrono>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ucp/coro/WhenAny.h"
#include "ucp/io/Operations.h"

#include "Backends.h"
#include "LoopRunner.h"
#include "SocketPair.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<EventLoop> make_loop() {
  LoopOptions options;
  options.backend = test::backend_under_test();
  auto loop = EventLoop::create(options);
  EXPECT_TRUE(loop) << loop.error().message();
  return loop ? std::move(*loop) : nullptr;
}

using test::SocketPair;

TEST(WithTimeout, ARecvWithoutDataEndsTimedOutAndLeavesNothingInFlight) {
  auto loop = make_loop();
  SocketPair pair;
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int fd, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    out = co_await with_timeout(io::recv(l, fd, buffer), 20ms);
  }(*loop, pair.b.get(), result));
  EXPECT_EQ(result.error(), std::errc::timed_out);
  EXPECT_EQ(loop->in_flight(), 0u);
  EXPECT_EQ(loop->armed_timers(), 0u);
}

TEST(WithTimeout, AnOperationThatCompletesFirstKeepsItsResult) {
  auto loop = make_loop();
  SocketPair pair;
  ASSERT_EQ(::write(pair.a.get(), "hi", 2), 2);
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int fd, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    out = co_await with_timeout(io::recv(l, fd, buffer), 10s);
  }(*loop, pair.b.get(), result));
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(*result, 2u);
  EXPECT_EQ(loop->armed_timers(), 0u);  // the deadline went with the operation
}

TEST(WithStop, RequestStopCancelsASleepAndARecv) {
  auto loop = make_loop();
  SocketPair pair;
  StopSource stop;
  Result<void> slept;
  Result<size_t> received = size_t{0};
  loop->spawn([](EventLoop& l, StopToken t, Result<void>& out) -> Task<> {
    out = co_await with_stop(io::sleep_for(l, 1h), t);
  }(*loop, stop.token(), slept));
  loop->spawn([](EventLoop& l, int fd, StopToken t, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    out = co_await with_stop(io::recv(l, fd, buffer), t);
  }(*loop, pair.b.get(), stop.token(), received));
  test::run_to_end(*loop, [](EventLoop& l, StopSource& s) -> Task<> {
    co_await io::sleep_for(l, 10ms);
    s.request_stop();
    co_await io::sleep_for(l, 10ms);  // let both finish before the loop stops
  }(*loop, stop));
  EXPECT_EQ(slept.error(), std::errc::operation_canceled);
  EXPECT_EQ(received.error(), std::errc::operation_canceled);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(WithStop, AnAlreadyStoppedTokenCancelsAtOnce) {
  auto loop = make_loop();
  SocketPair pair;
  StopSource stop;
  stop.request_stop();
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int fd, StopToken t, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    out = co_await with_stop(io::recv(l, fd, buffer), t);
  }(*loop, pair.b.get(), stop.token(), result));
  EXPECT_EQ(result.error(), std::errc::operation_canceled);
}

Task<Result<size_t>> two_reads(EventLoop& loop, int fd, StopToken stop) {
  std::array<std::byte, 16> buffer;
  auto first = co_await with_stop(io::recv(loop, fd, buffer), stop);
  if (!first) co_return first;
  co_return co_await with_stop(io::recv(loop, fd, buffer), stop);
}

TEST(WithTimeout, AWholeTaskIsStoppedThroughItsToken) {
  auto loop = make_loop();
  SocketPair pair;
  ASSERT_EQ(::write(pair.a.get(), "x", 1), 1);  // the first read completes, the second waits
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int fd, Result<size_t>& out) -> Task<> {
    out =
        co_await with_timeout(l, 30ms, [&l, fd](StopToken stop) { return two_reads(l, fd, stop); });
  }(*loop, pair.b.get(), result));
  EXPECT_EQ(result.error(), std::errc::timed_out);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(WithTimeout, NestsInsideWithStopAndEachKeepsItsReason) {
  auto loop = make_loop();
  SocketPair pair;
  StopSource never;
  StopSource stopped;
  Result<size_t> timed = size_t{0};
  Result<size_t> cancelled = size_t{0};
  Result<void> unbounded;
  loop->spawn([](EventLoop& l, int fd, StopToken t, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    out = co_await with_stop(with_timeout(io::recv(l, fd, buffer), 20ms), t);
  }(*loop, pair.b.get(), never.token(), timed));
  loop->spawn([](EventLoop& l, StopToken t, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 16> buffer;
    SocketPair own;
    out = co_await with_stop(with_deadline(io::recv(l, own.b.get(), buffer), Clock::now() + 1h), t);
  }(*loop, stopped.token(), cancelled));
  test::run_to_end(*loop, [](EventLoop& l, StopSource& s, Result<void>& out) -> Task<> {
    // No deadline at all (max) arms no timer: only the sleep's own one is armed.
    out = co_await with_deadline(io::sleep_for(l, 30ms), Clock::time_point::max());
    s.request_stop();
    co_await io::sleep_for(l, 10ms);
  }(*loop, stopped, unbounded));
  EXPECT_EQ(timed.error(), std::errc::timed_out);
  EXPECT_EQ(cancelled.error(), std::errc::operation_canceled);
  EXPECT_TRUE(unbounded) << unbounded.error().message();
  EXPECT_EQ(loop->in_flight(), 0u);
  EXPECT_EQ(loop->armed_timers(), 0u);
}

/// Receives on `fd` until stopped; records how it ended.
Task<Result<size_t>> receive_some(EventLoop& loop, int fd, StopToken stop, std::error_code& ended) {
  std::array<std::byte, 16> buffer;
  auto n = co_await with_stop(io::recv(loop, fd, buffer), stop);
  ended = n ? std::error_code{} : n.error();
  co_return n;
}

Task<Result<size_t>> sleep_then_answer(EventLoop& loop, StopToken stop) {
  auto slept = co_await with_stop(io::sleep_for(loop, 10ms), stop);
  if (!slept) co_return Unexpected{slept.error()};
  co_return size_t{42};
}

TEST(WhenAny, OverRealOperationsTheLoserIsCancelledAndFinishedBeforeItReturns) {
  auto loop = make_loop();
  SocketPair quiet;  // nothing ever arrives: only the stop ends this receive
  WhenAnyResult<Result<size_t>> first{0, size_t{0}};
  std::error_code receive_ended;
  std::error_code ended_when_any_returned;
  test::run_to_end(*loop,
                   [](EventLoop& l, int fd, WhenAnyResult<Result<size_t>>& out,
                      std::error_code& ended, std::error_code& seen) -> Task<> {
                     StopSource stop;
                     out = co_await when_any(stop, receive_some(l, fd, stop.token(), ended),
                                             sleep_then_answer(l, stop.token()));
                     seen =
                         ended;  // the receive's completion has arrived and its task has finished
                   }(*loop, quiet.b.get(), first, receive_ended, ended_when_any_returned));
  EXPECT_EQ(first.index, 1u);
  ASSERT_TRUE(first.value);
  EXPECT_EQ(*first.value, 42u);
  EXPECT_EQ(ended_when_any_returned, std::errc::operation_canceled);
  EXPECT_EQ(loop->in_flight(), 0u);
}

}  // namespace
}  // namespace ucp
