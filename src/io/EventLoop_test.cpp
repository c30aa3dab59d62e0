#include "ucp/io/EventLoop.h"

#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ucp/io/Operations.h"

namespace ucp {
namespace {

std::unique_ptr<EventLoop> make_loop(LoopOptions options = {}) {
  auto loop = EventLoop::create(options);
  if (!loop) {
    ADD_FAILURE() << EventLoop::describe_setup_error(loop.error(), options);
    return nullptr;
  }
  return std::move(*loop);
}

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = UniqueFd(fds[0]);
    b = UniqueFd(fds[1]);
  }
};

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Runs `body` as a spawned task and stops the loop when it finishes.
void run_task(EventLoop& loop, Task<> body) {
  loop.spawn([](EventLoop& l, Task<> inner) -> Task<> {
    co_await std::move(inner);
    l.stop();
  }(loop, std::move(body)));
  loop.run();
}

TEST(EventLoop, ReportsProbedFeatures) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  EXPECT_NE(loop->features().describe().find("defer_taskrun="), std::string::npos);
  EXPECT_TRUE(loop->features().nodrop);
}

TEST(EventLoop, WritesAndReadsOverASocketPair) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  std::string received;
  run_task(*loop, [](EventLoop& l, int a, int b, std::string& out) -> Task<> {
    std::string message = "hello proactor";
    auto sent = co_await io::send(l, a, bytes_of(message));
    EXPECT_TRUE(sent);
    EXPECT_EQ(*sent, message.size());
    std::array<std::byte, 64> buffer;
    auto n = co_await io::recv(l, b, buffer);
    EXPECT_TRUE(n);
    out.assign(reinterpret_cast<const char*>(buffer.data()), *n);
  }(*loop, pair.a.get(), pair.b.get(), received));
  EXPECT_EQ(received, "hello proactor");
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(EventLoop, RecvReturnsZeroOnlyAtEndOfStream) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  pair.a.reset();
  Result<size_t> result = size_t{99};
  Result<size_t> empty_read = size_t{99};
  run_task(*loop, [](EventLoop& l, int b, Result<size_t>& r, Result<size_t>& e) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer);
    e = co_await io::recv(l, b, std::span<std::byte>());  // refused, never submitted
  }(*loop, pair.b.get(), result, empty_read));
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, 0u);
  EXPECT_EQ(empty_read.error(), std::errc::invalid_argument);
}

TEST(EventLoop, SleepCompletesThroughATimeoutOperation) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  Result<void> slept = Unexpected{std::errc::io_error};
  run_task(*loop, [](EventLoop& l, Result<void>& r) -> Task<> {
    r = co_await io::sleep_for(l, std::chrono::milliseconds(5));
  }(*loop, slept));
  EXPECT_TRUE(slept) << slept.error().message();
}

TEST(EventLoop, LinkedTimeoutEndsARecvThatGetsNoData) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  Result<size_t> result = size_t{0};
  run_task(*loop, [](EventLoop& l, int b, Result<size_t>& r) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer, /*timeout_ms=*/20);
  }(*loop, pair.b.get(), result));
  EXPECT_EQ(result.error(), std::errc::timed_out);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(EventLoop, LinkedTimeoutDoesNotFireWhenDataArrivesFirst) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  ASSERT_EQ(::write(pair.a.get(), "x", 1), 1);
  Result<size_t> result = size_t{0};
  run_task(*loop, [](EventLoop& l, int b, Result<size_t>& r) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer, /*timeout_ms=*/10000);
  }(*loop, pair.b.get(), result));
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, 1u);
}

TEST(EventLoop, CancelFdEndsAPendingRecvWithOperationCanceled) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  Result<size_t> reader = size_t{0};
  Result<size_t> cancelled = size_t{0};
  int fd = pair.b.get();
  loop->spawn([](EventLoop& l, int b, Result<size_t>& r) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer, /*timeout_ms=*/10000);
    l.stop();
  }(*loop, fd, reader));
  loop->spawn([](EventLoop& l, int b, Result<size_t>& c) -> Task<> {
    co_await io::sleep_for(l, std::chrono::milliseconds(10));
    c = co_await io::cancel_fd(l, b);
  }(*loop, fd, cancelled));
  loop->run();
  EXPECT_EQ(reader.error(), std::errc::operation_canceled);
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(*cancelled, 1u);
}

TEST(EventLoop, StopCancelsAndReapsEverythingInFlight) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  int finished = 0;
  for (int i = 0; i < 3; ++i) {
    loop->spawn([](EventLoop& l, int b, int& done) -> Task<> {
      std::array<std::byte, 16> buffer;
      auto r = co_await io::recv(l, b, buffer);
      EXPECT_FALSE(r);
      ++done;
    }(*loop, pair.b.get(), finished));
  }
  loop->post([&loop] { loop->stop(); });
  loop->run();
  EXPECT_EQ(finished, 3);
  EXPECT_EQ(loop->in_flight(), 0u);
  EXPECT_EQ(loop->spawned_count(), 0u);
}

TEST(EventLoop, TinyRingCompletesAThousandOperationsThroughThePendingQueue) {
  LoopOptions options;
  options.ring_entries = 8;
  options.pending_queue_capacity = 4096;
  auto loop = make_loop(options);
  ASSERT_TRUE(loop);
  int completed = 0;
  for (int i = 0; i < 1000; ++i) {
    loop->spawn([](EventLoop& l, int& done) -> Task<> {
      auto r = co_await io::sleep_for(l, std::chrono::milliseconds(1));
      EXPECT_TRUE(r);
      if (++done == 1000) l.stop();
    }(*loop, completed));
  }
  loop->run();
  EXPECT_EQ(completed, 1000);
  EXPECT_GT(loop->stats().sq_full_deferrals, 0u);
}

TEST(EventLoop, RefusesOperationsWhenSqAndPendingQueueAreFull) {
  LoopOptions options;
  options.ring_entries = 8;
  options.pending_queue_capacity = 8;
  auto loop = make_loop(options);
  ASSERT_TRUE(loop);
  int refused = 0, completed = 0;
  for (int i = 0; i < 40; ++i) {
    loop->spawn([](EventLoop& l, int& no, int& yes) -> Task<> {
      auto r = co_await io::sleep_for(l, std::chrono::milliseconds(1));
      if (r) {
        ++yes;
      } else {
        EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
        ++no;
      }
    }(*loop, refused, completed));
  }
  loop->spawn([](EventLoop& l) -> Task<> {
    co_await io::sleep_for(l, std::chrono::milliseconds(50));
    l.stop();
  }(*loop));
  loop->run();
  EXPECT_EQ(refused + completed, 40);
  EXPECT_GT(refused, 0);  // told, not dropped silently
  EXPECT_GT(completed, 0);
}

TEST(EventLoop, CqOverflowLosesNoCompletion) {
  LoopOptions options;
  options.ring_entries = 8;  // CQ of 32: 300 timers that all expire at once overflow it
  auto loop = make_loop(options);
  ASSERT_TRUE(loop);
  int completed = 0;
  for (int i = 0; i < 300; ++i) {
    loop->spawn([](EventLoop& l, int& done) -> Task<> {
      auto r = co_await io::sleep_for(l, std::chrono::milliseconds(30));
      EXPECT_TRUE(r);
      if (++done == 300) l.stop();
    }(*loop, completed));
  }
  loop->run();
  EXPECT_EQ(completed, 300);
}

TEST(EventLoop, PostsFromFourThreadsAllRunInPerThreadOrder) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<int> next(kThreads, 0);
  int total = 0;
  bool in_order = true;
  std::thread runner([&] { loop->run(); });
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop->post([&, t, i] {
          in_order = in_order && next[t] == i;
          ++next[t];
          if (++total == kThreads * kPerThread) loop->stop();
        });
      }
    });
  }
  for (auto& p : posters) p.join();
  runner.join();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(total, kThreads * kPerThread);
  // Coalescing: far fewer eventfd writes than posts.
  EXPECT_LT(loop->wakeups_written(), static_cast<uint64_t>(kThreads * kPerThread));
}

TEST(EventLoop, SetupErrorsAreExplained) {
  LoopOptions options;
  auto text = EventLoop::describe_setup_error(
      std::make_error_code(std::errc::operation_not_permitted), options);
  EXPECT_NE(text.find("io_uring_disabled"), std::string::npos);
  EXPECT_NE(text.find("seccomp"), std::string::npos);
  text =
      EventLoop::describe_setup_error(std::make_error_code(std::errc::not_enough_memory), options);
  EXPECT_NE(text.find("RLIMIT_MEMLOCK"), std::string::npos);
}

// Resumes the awaiting coroutine later in this iteration, behind what is ready now.
struct YieldToReady {
  EventLoop& loop;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> caller) { loop.schedule(caller); }
  void await_resume() const noexcept {}
};

struct RecordingHook : io::PreSubmitHook {
  std::vector<std::string>* order = nullptr;
  std::string name;
};

TEST(EventLoop, PreSubmitHooksRunOnceAfterTheReadyCoroutinesAndCanBeCancelled) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  std::vector<std::string> order;
  RecordingHook hook, cancelled;
  for (RecordingHook* h : {&hook, &cancelled}) {
    h->order = &order;
    h->run = [](io::PreSubmitHook& self) noexcept {
      auto& recording = static_cast<RecordingHook&>(self);
      recording.order->push_back(recording.name);
    };
  }
  hook.name = "hook";
  cancelled.name = "cancelled";
  run_task(
      *loop,
      [](EventLoop& l, RecordingHook& h, RecordingHook& c, std::vector<std::string>& o) -> Task<> {
        l.run_before_submit(h);
        l.run_before_submit(h);  // already waiting: still runs once
        l.run_before_submit(c);
        l.cancel_before_submit(c);
        co_await YieldToReady{l};
        o.push_back("resumed");  // ready work of this iteration comes before the hook
        co_await io::sleep_for(l, std::chrono::milliseconds(1));
        o.push_back("slept");
      }(*loop, hook, cancelled, order));
  EXPECT_EQ(order, (std::vector<std::string>{"resumed", "hook", "slept"}));
}

TEST(EventLoop, VectoredSendGathersBuffersIntoOneSend) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  struct Outcome {
    int32_t res = -1;
    int calls = 0;
  } outcome;
  io::VectoredSend send(*loop, pair.a.get(), &outcome, [](void* owner, int32_t res) noexcept {
    auto* o = static_cast<Outcome*>(owner);
    o->res = res;
    ++o->calls;
  });
  std::string received;
  run_task(*loop, [](EventLoop& l, io::VectoredSend& s, int fd, std::string& got) -> Task<> {
    std::string first = "hello, ", second = "gathered ", third = "world";
    iovec buffers[3] = {
        {first.data(), first.size()}, {second.data(), second.size()}, {third.data(), third.size()}};
    if (!s.start(buffers)) co_return;
    std::array<std::byte, 64> buffer{};
    while (got.size() < 21) {
      auto n = co_await io::recv(l, fd, buffer);
      if (!n || *n == 0) co_return;
      got.append(reinterpret_cast<const char*>(buffer.data()), *n);
    }
  }(*loop, send, pair.b.get(), received));
  EXPECT_EQ(received, "hello, gathered world");
  EXPECT_EQ(outcome.calls, 1);
  EXPECT_EQ(outcome.res, 21);
  EXPECT_FALSE(send.in_flight());
}

}  // namespace
}  // namespace ucp
