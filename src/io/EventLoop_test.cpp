#include "ucp/io/EventLoop.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/io/detail/RingMessage.h"
#include "ucp/io/detail/VectoredSend.h"

#include "Backends.h"
#include "LoopRunner.h"
#include "SocketPair.h"
#include "io/uring/FixedBuffers.h"

namespace ucp {
namespace {

std::unique_ptr<EventLoop> make_loop(BackendKind backend, LoopOptions options = {}) {
  options.backend = backend;
  auto loop = EventLoop::create(options);
  if (!loop) {
    ADD_FAILURE() << EventLoop::describe_setup_error(loop.error(), options);
    return nullptr;
  }
  return std::move(*loop);
}

using test::SocketPair;

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Reads of /dev/zero complete at once: cheap operations that each take one submission slot.
UniqueFd open_dev_zero() {
  UniqueFd fd(::open("/dev/zero", O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd);
  return fd;
}

// The tests of LoopBackends run on io_uring and on epoll: the same operations must complete
// with the same results on both. The io_uring-only ones (SQ/CQ sizing, registered buffers,
// ring messages) are plain TESTs below that ask for io_uring.
class LoopBackends : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopBackends, test::kAllBackends, test::backend_name);

TEST(EventLoop, ReportsProbedFeatures) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  auto loop = make_loop(BackendKind::kIoUring);
  ASSERT_TRUE(loop);
  EXPECT_STREQ(loop->backend_name(), "io_uring");
  EXPECT_NE(loop->describe().find("defer_taskrun="), std::string::npos);
  EXPECT_NE(loop->describe().find("nodrop=on"), std::string::npos);
}

TEST_P(LoopBackends, WritesAndReadsOverASocketPair) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  std::string received;
  test::run_to_end(*loop, [](EventLoop& l, int a, int b, std::string& out) -> Task<> {
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

TEST_P(LoopBackends, RecvReturnsZeroOnlyAtEndOfStream) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  pair.a.reset();
  Result<size_t> result = size_t{99};
  Result<size_t> empty_read = size_t{99};
  test::run_to_end(*loop, [](EventLoop& l, int b, Result<size_t>& r, Result<size_t>& e) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer);
    e = co_await io::recv(l, b, std::span<std::byte>());  // refused, never submitted
  }(*loop, pair.b.get(), result, empty_read));
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, 0u);
  EXPECT_EQ(empty_read.error(), std::errc::invalid_argument);
}

TEST_P(LoopBackends, SleepCompletesOnTheTimerHeap) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  Result<void> slept = Unexpected{std::errc::io_error};
  test::run_to_end(*loop, [](EventLoop& l, Result<void>& r) -> Task<> {
    r = co_await io::sleep_for(l, std::chrono::milliseconds(5));
  }(*loop, slept));
  EXPECT_TRUE(slept) << slept.error().message();
}

TEST_P(LoopBackends, LinkedTimeoutEndsARecvThatGetsNoData) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int b, Result<size_t>& r) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer, /*timeout_ms=*/20);
  }(*loop, pair.b.get(), result));
  EXPECT_EQ(result.error(), std::errc::timed_out);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST_P(LoopBackends, LinkedTimeoutDoesNotFireWhenDataArrivesFirst) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  ASSERT_EQ(::write(pair.a.get(), "x", 1), 1);
  Result<size_t> result = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int b, Result<size_t>& r) -> Task<> {
    std::array<std::byte, 16> buffer;
    r = co_await io::recv(l, b, buffer, /*timeout_ms=*/10000);
  }(*loop, pair.b.get(), result));
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, 1u);
}

TEST_P(LoopBackends, CancelFdEndsAPendingRecvWithOperationCanceled) {
  auto loop = make_loop(GetParam());
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

TEST_P(LoopBackends, StopCancelsAndReapsEverythingInFlight) {
  auto loop = make_loop(GetParam());
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
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  LoopOptions options;
  options.ring_entries = 8;
  options.pending_queue_capacity = 4096;
  auto loop = make_loop(BackendKind::kIoUring, options);
  ASSERT_TRUE(loop);
  UniqueFd zero = open_dev_zero();
  int completed = 0;
  for (int i = 0; i < 1000; ++i) {
    loop->spawn([](EventLoop& l, int fd, int& done) -> Task<> {
      std::array<std::byte, 8> buffer;
      auto r = co_await io::read(l, fd, buffer);
      EXPECT_TRUE(r);
      if (++done == 1000) l.stop();
    }(*loop, zero.get(), completed));
  }
  loop->run();
  EXPECT_EQ(completed, 1000);
  EXPECT_GT(loop->stats().deferred_submissions, 0u);
}

TEST_P(LoopBackends, CompletionBatchLimitLeavesTheRestForLaterIterationsAndLosesNothing) {
  LoopOptions options;
  options.ring_entries = 64;
  options.cqe_batch = 3;
  auto loop = make_loop(GetParam(), options);
  ASSERT_TRUE(loop);
  UniqueFd zero = open_dev_zero();
  int completed = 0;
  for (int i = 0; i < 500; ++i) {
    loop->spawn([](EventLoop& l, int fd, int& done) -> Task<> {
      std::array<std::byte, 8> buffer;
      auto r = co_await io::read(l, fd, buffer);
      EXPECT_TRUE(r);
      if (++done == 500) l.stop();
    }(*loop, zero.get(), completed));
  }
  loop->run();
  EXPECT_EQ(completed, 500);
}

TEST(EventLoop, RefusesOperationsWhenSqAndPendingQueueAreFull) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  LoopOptions options;
  options.ring_entries = 8;
  options.pending_queue_capacity = 8;
  auto loop = make_loop(BackendKind::kIoUring, options);
  ASSERT_TRUE(loop);
  UniqueFd zero = open_dev_zero();
  int refused = 0, completed = 0;
  for (int i = 0; i < 40; ++i) {  // all prepared in one iteration: 8 in the SQ, 8 pending
    loop->spawn([](EventLoop& l, int fd, int& no, int& yes) -> Task<> {
      std::array<std::byte, 8> buffer;
      auto r = co_await io::read(l, fd, buffer);
      if (r) {
        ++yes;
      } else {
        EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
        ++no;
      }
    }(*loop, zero.get(), refused, completed));
  }
  loop->spawn([](EventLoop& l) -> Task<> {
    co_await io::sleep_for(l, std::chrono::milliseconds(50));
    l.stop();
  }(*loop));
  loop->run();
  EXPECT_EQ(refused + completed, 40);
  EXPECT_EQ(refused, 24);  // told, not dropped silently
  EXPECT_EQ(completed, 16);
}

TEST(EventLoop, CqOverflowLosesNoCompletion) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  LoopOptions options;
  options.ring_entries = 8;  // a CQ of 32: 300 reads that all complete at once overflow it
  auto loop = make_loop(BackendKind::kIoUring, options);
  ASSERT_TRUE(loop);
  UniqueFd zero = open_dev_zero();
  int completed = 0;
  for (int i = 0; i < 300; ++i) {
    loop->spawn([](EventLoop& l, int fd, int& done) -> Task<> {
      std::array<std::byte, 8> buffer;
      auto r = co_await io::read(l, fd, buffer);
      EXPECT_TRUE(r);
      if (++done == 300) l.stop();
    }(*loop, zero.get(), completed));
  }
  loop->run();
  EXPECT_EQ(completed, 300);
  EXPECT_GT(loop->stats().completion_overflows, 0u);
}

TEST_P(LoopBackends, TimersFireInDueOrderAndCancelledSleepsEndEarly) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  std::vector<int> order;
  for (int i : {30, 10, 20}) {
    loop->spawn([](EventLoop& l, int ms, std::vector<int>& o) -> Task<> {
      auto r = co_await io::sleep_for(l, std::chrono::milliseconds(ms));
      EXPECT_TRUE(r);
      o.push_back(ms);
    }(*loop, i, order));
  }
  Result<void> cancelled;
  io::SleepOp* long_sleep = nullptr;
  loop->spawn([](EventLoop& l, Result<void>& out, io::SleepOp*& handle) -> Task<> {
    io::SleepOp sleep = io::sleep_for(l, std::chrono::hours(1));
    handle = &sleep;
    out = co_await sleep;
    handle = nullptr;
  }(*loop, cancelled, long_sleep));
  loop->spawn([](EventLoop& l, io::SleepOp*& handle) -> Task<> {
    co_await io::sleep_for(l, std::chrono::milliseconds(40));
    if (handle != nullptr) handle->cancel();
    co_await io::sleep_for(l, std::chrono::milliseconds(1));
    l.stop();
  }(*loop, long_sleep));
  loop->run();
  EXPECT_EQ(order, (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(cancelled.error(), std::errc::operation_canceled);
  EXPECT_EQ(loop->armed_timers(), 0u);
}

TEST_P(LoopBackends, PostsFromFourThreadsAllRunInPerThreadOrder) {
  auto loop = make_loop(GetParam());
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

TEST(EventLoop, RegisteredBuffersCarryFixedReadsAndWrites) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  LoopOptions options;
  options.backend = BackendKind::kIoUring;
  options.registered_buffers_count = 4;
  options.registered_buffer_size = 4096;
  std::string warnings;
  auto created = EventLoop::create(options, &warnings);
  ASSERT_TRUE(created) << created.error().message();
  EventLoop& loop = **created;
  EXPECT_EQ(warnings, "");
  ASSERT_TRUE(loop.capabilities().registered_buffers);
  SocketPair pair;
  std::string received;
  test::run_to_end(loop, [](EventLoop& l, int a, int b, std::string& out) -> Task<> {
    BufferLease source = detail::LoopAccess::borrow_receive_buffer(l);
    BufferLease target = detail::LoopAccess::borrow_receive_buffer(l);
    EXPECT_EQ(source.source(), BufferLease::Source::kRegistered);
    EXPECT_EQ(target.source(), BufferLease::Source::kRegistered);
    EXPECT_NE(source.registered_index(), target.registered_index());
    // The send's bytes lie inside a registered buffer: the backend uses WRITE_FIXED.
    std::memcpy(source.writable().data(), "fixed buffers", 13);
    io::SendAllOp send(l, a, source.writable().first(13));
    auto sent = co_await send;
    EXPECT_TRUE(sent);
    // READ_FIXED into the other one.
    io::RecvOp recv(l, b, target.writable(), 1000);
    recv.set_registered_buffer(target.registered_index());
    auto n = co_await recv;
    EXPECT_TRUE(n);
    if (n) out.assign(reinterpret_cast<const char*>(target.writable().data()), *n);
  }(loop, pair.a.get(), pair.b.get(), received));
  EXPECT_EQ(received, "fixed buffers");
  // Dropped leases went back: all four can be borrowed again.
  std::vector<BufferLease> all;
  for (int i = 0; i < 4; ++i) all.push_back(detail::LoopAccess::borrow_receive_buffer(loop));
  for (const auto& lease : all) EXPECT_EQ(lease.source(), BufferLease::Source::kRegistered);
  EXPECT_EQ(detail::LoopAccess::borrow_receive_buffer(loop).source(), BufferLease::Source::kPool);
}

TEST(FixedBuffers, LendEachBufferOnceAndLocateSpans) {
  constexpr size_t kBytes = 2 * 128;
  void* storage =
      ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(storage, MAP_FAILED);
  detail::FixedBuffers fixed(static_cast<std::byte*>(storage), kBytes, 2, 128);  // unmaps it
  auto first = fixed.acquire(), second = fixed.acquire();
  ASSERT_TRUE(first && second);
  EXPECT_NE(*first, *second);
  EXPECT_FALSE(fixed.acquire());  // all borrowed: the caller falls back to its own memory
  EXPECT_EQ(fixed.in_use(), 2u);
  std::byte* start = fixed.buffer(*second).data();
  EXPECT_EQ(fixed.index_of(start + 100, 28), *second);
  EXPECT_EQ(fixed.index_of(start + 100, 29), -1);  // would cross into the next buffer
  std::byte outside[8];
  EXPECT_EQ(fixed.index_of(outside, sizeof outside), -1);
  fixed.release(*first);
  EXPECT_EQ(fixed.acquire(), first);
}

TEST(EventLoop, RegisteredBuffersOverTheMemlockLimitGiveOneWarningAndNoBuffers) {
  // Root has CAP_IPC_LOCK, which exempts it from the limit: drop it in a child process.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2]{};
    ::syscall(SYS_capget, &header, caps);
    caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    caps[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
    if (::syscall(SYS_capset, &header, caps) != 0) ::_exit(10);
    rlimit limit{65536, 65536};
    if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) ::_exit(11);
    LoopOptions options;
    options.backend = BackendKind::kIoUring;
    options.ring_entries = 8;
    options.registered_buffers_count = 64;
    options.registered_buffer_size = 4096;  // 256 KiB > 64 KiB
    std::string warnings;
    auto loop = EventLoop::create(options, &warnings);
    if (!loop) ::_exit(12);
    if ((*loop)->capabilities().registered_buffers) ::_exit(13);
    bool names_figures = warnings.find("RLIMIT_MEMLOCK = 65536 bytes") != std::string::npos &&
                         warnings.find("64 x 4096 = 262144 bytes") != std::string::npos;
    if (!names_figures) {
      std::fprintf(stderr, "warning was: %s\n", warnings.c_str());
      ::_exit(14);
    }
    if (std::count(warnings.begin(), warnings.end(), '\n') != 1) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed at step " << WEXITSTATUS(status);
}

// ---- ring-to-ring messages (IORING_OP_MSG_RING) between loops on two threads ----

size_t open_fd_count() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

// Yields until `done()`, for a minute at most: false when the time ran out.
template <class Predicate>
bool spin_until(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Sends `count` values from `from` to `to`, up to `window` at once, each with its own
// RingMessage. `value_of(i)` makes value i; `on_failed(value, error)` takes back a value that
// did not arrive (refused before sending, or failed in the sender's CQE).
struct MessageBlaster {
  struct Slot : detail::RingMessage {
    Slot() noexcept : RingMessage(hook<&Slot::on_sent>) {}
    void on_sent(Result<void> delivered) noexcept {
      blaster->in_flight--;
      if (!delivered) blaster->failed(value(), delivered.error());
      blaster->free.push_back(this);
    }
    MessageBlaster* blaster = nullptr;
  };
  std::function<int32_t(int)> value_of;
  std::function<void(int32_t, std::error_code)> failed;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<Slot*> free;
  int in_flight = 0;

  MessageBlaster(size_t window, std::function<int32_t(int)> make,
                 std::function<void(int32_t, std::error_code)> on_failed)
      : value_of(std::move(make)), failed(std::move(on_failed)) {
    for (size_t i = 0; i < window; ++i) {
      slots.push_back(std::make_unique<Slot>());
      slots.back()->blaster = this;
      free.push_back(slots.back().get());
    }
  }

  // Until `count` values were sent or refused; a refused value goes to `failed` unless
  // `retry_refused` (then it is sent again a little later: the target is not open yet).
  Task<> run(EventLoop& from, EventLoop& to, int count, bool retry_refused) {
    for (int i = 0; i < count;) {
      if (free.empty()) {
        co_await io::sleep_for(from, std::chrono::milliseconds(1));
        continue;
      }
      int32_t value = value_of(i);
      Slot* slot = free.back();
      auto sent = slot->send(from, to, value);
      if (sent) {
        free.pop_back();
        ++in_flight;
        ++i;
        continue;
      }
      if (retry_refused && sent.error() == std::errc::connection_refused) {
        co_await io::sleep_for(from, std::chrono::milliseconds(1));
        continue;
      }
      failed(value, sent.error());
      ++i;
    }
    while (in_flight > 0) co_await io::sleep_for(from, std::chrono::milliseconds(1));
  }
};

struct MessageCase {
  const char* name;
  LoopOptions receiver;
  LoopOptions sender;
};

LoopOptions with(bool sqpoll, bool defer_taskrun) {
  LoopOptions options;
  options.backend = BackendKind::kIoUring;
  options.ring_entries = 64;  // a CQ of 256: 20,000 messages must also survive overflow
  options.sqpoll = sqpoll;
  options.defer_taskrun = defer_taskrun;
  return options;
}

class RingMessages : public ::testing::TestWithParam<MessageCase> {};

TEST_P(RingMessages, EveryValueReachesTheOtherLoopExactlyOnce) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  auto receiver = make_loop(BackendKind::kIoUring, GetParam().receiver);
  auto sender = make_loop(BackendKind::kIoUring, GetParam().sender);
  ASSERT_TRUE(receiver && sender);
  if (!sender->capabilities().ring_messages) GTEST_SKIP() << "kernel lacks IORING_OP_MSG_RING";
  constexpr int kCount = 20000;
  std::vector<int> seen(kCount, 0);
  int received = 0;
  bool on_loop_thread = true;
  EventLoop& r = *receiver;
  detail::LoopAccess::set_message_handler(*receiver, [&](int32_t value) {
    on_loop_thread = on_loop_thread && r.in_loop_thread();
    if (value >= 0 && value < kCount) ++seen[static_cast<size_t>(value)];
    if (++received == kCount) r.stop();
  });
  std::thread receiver_thread([&] { receiver->run(); });
  std::vector<std::string> failures;
  MessageBlaster blaster(
      256, [](int i) { return static_cast<int32_t>(i); },
      [&](int32_t value, std::error_code error) {
        failures.push_back(std::to_string(value) + ": " + error.message());
      });
  std::thread sender_thread([&] {
    test::run_to_end(*sender, blaster.run(*sender, *receiver, kCount, /*retry_refused=*/true));
  });
  sender_thread.join();
  receiver_thread.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first " << failures.front();
  EXPECT_EQ(received, kCount);
  int wrong = 0;
  for (int count : seen) wrong += count != 1;
  EXPECT_EQ(wrong, 0) << "values lost or duplicated";
  EXPECT_TRUE(on_loop_thread);
  EXPECT_EQ(receiver->in_flight(), 0u);  // messages never count as our own operations
  EXPECT_EQ(sender->in_flight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Rings, RingMessages,
    ::testing::Values(MessageCase{"defer_to_defer", with(false, true), with(false, true)},
                      MessageCase{"defer_to_coop", with(false, false), with(false, true)},
                      MessageCase{"sqpoll_to_defer", with(false, true), with(true, false)},
                      MessageCase{"defer_to_sqpoll", with(true, false), with(false, true)}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(EventLoop, LoopWithoutMessageHandlerRefusesMessages) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  auto receiver = make_loop(BackendKind::kIoUring);
  auto sender = make_loop(BackendKind::kIoUring);
  ASSERT_TRUE(receiver && sender);
  if (!sender->capabilities().ring_messages) GTEST_SKIP() << "kernel lacks IORING_OP_MSG_RING";
  Result<void> result;
  test::run_to_end(*sender, [](EventLoop& from, EventLoop& to, Result<void>& out) -> Task<> {
    out = co_await detail::send_message(from, to, 7);
  }(*sender, *receiver, result));
  EXPECT_EQ(result.error(), std::errc::connection_refused);
  EXPECT_EQ(receiver->in_flight(), 0u);
}

// The TcpServer case: the values are fds. A loop that stops while fds are on their way
// receives them during its shutdown (and closes them); the sender closes what was refused.
// Nothing may leak: the process holds as many fds afterwards as before.
TEST(EventLoop, FdsSentToAStoppingLoopAreClosedOrReturnedNeverLeaked) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  auto receiver = make_loop(BackendKind::kIoUring, with(false, true));
  auto sender = make_loop(BackendKind::kIoUring, with(false, true));
  ASSERT_TRUE(receiver && sender);
  if (!sender->capabilities().ring_messages) GTEST_SKIP() << "kernel lacks IORING_OP_MSG_RING";
  UniqueFd original(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(original);
  size_t baseline = open_fd_count();

  constexpr int kCount = 30000;
  std::atomic<int> handled{0};
  std::atomic<int> handled_while_closing{0};
  std::atomic<bool> receiver_running{false};
  EventLoop& r = *receiver;
  // The receiver stops itself once messages are flowing, while many are still on their way:
  // from its own thread, so the stop falls mid-stream however the threads are scheduled.
  detail::LoopAccess::set_message_handler(*receiver, [&](int32_t fd) {
    if (r.io_closed()) handled_while_closing.fetch_add(1, std::memory_order_relaxed);
    UniqueFd owned(fd);  // handled or not, the receiver owns it now
    if (handled.fetch_add(1, std::memory_order_relaxed) + 1 == 2000) r.stop();
  });
  std::thread receiver_thread([&] {
    receiver_running = true;
    receiver->run();
  });
  EXPECT_TRUE(spin_until([&] { return receiver_running.load(); }));

  int returned = 0;
  std::vector<std::string> unexpected;
  MessageBlaster blaster(
      128, [&](int) { return static_cast<int32_t>(::dup(original.get())); },
      [&](int32_t fd, std::error_code error) {
        if (error != std::errc::connection_refused) unexpected.push_back(error.message());
        ::close(fd);  // not delivered: still ours
        ++returned;
      });
  // Retry refusals only until the receiver has opened; after its stop they are final.
  std::thread sender_thread([&] {
    test::run_to_end(
        *sender,
        [](MessageBlaster& b, EventLoop& from, EventLoop& to, int source,
           std::atomic<int>& got) -> Task<> {
          while (got.load() == 0) {  // wait for the mailbox to open, with one probe at a time
            int32_t fd = static_cast<int32_t>(::dup(source));
            auto sent = co_await detail::send_message(from, to, fd);
            if (!sent) {
              ::close(fd);
              co_await io::sleep_for(from, std::chrono::milliseconds(1));
            } else {
              break;
            }
          }
          co_await b.run(from, to, kCount, /*retry_refused=*/false);
        }(blaster, *sender, *receiver, original.get(), handled));
  });
  sender_thread.join();
  receiver_thread.join();

  EXPECT_TRUE(unexpected.empty()) << unexpected.front();
  EXPECT_EQ(handled.load() + returned, kCount + 1);  // + the opening probe
  EXPECT_GT(returned, 0) << "the receiver stopped after every message: nothing was tested";
  EXPECT_EQ(receiver->in_flight(), 0u);
  EXPECT_EQ(open_fd_count(), baseline) << "fds leaked";
  std::printf("handled %d (during shutdown %d), returned to the sender %d\n", handled.load(),
              handled_while_closing.load(), returned);
}

// Deterministic version of the race above: the messages are reserved and prepared while the
// target is still open, but reach the kernel only after the target began shutting down.
TEST(EventLoop, MessagesAlreadyOnTheirWayWhenTheTargetStopsAreStillHandled) {
  UCP_SKIP_UNLESS_BACKEND_USABLE(BackendKind::kIoUring);
  auto receiver = make_loop(BackendKind::kIoUring, with(false, true));
  auto sender = make_loop(BackendKind::kIoUring, with(false, true));
  ASSERT_TRUE(receiver && sender);
  if (!sender->capabilities().ring_messages) GTEST_SKIP() << "kernel lacks IORING_OP_MSG_RING";
  UniqueFd original(::eventfd(0, EFD_CLOEXEC));
  size_t baseline = open_fd_count();
  constexpr int kCount = 100;
  std::atomic<int> handled{0};
  std::atomic<int> handled_while_closing{0};
  EventLoop& r = *receiver;
  detail::LoopAccess::set_message_handler(*receiver, [&](int32_t fd) {
    if (r.io_closed()) handled_while_closing.fetch_add(1, std::memory_order_relaxed);
    UniqueFd owned(fd);
    handled.fetch_add(1, std::memory_order_relaxed);
  });
  std::thread receiver_thread([&] { receiver->run(); });
  // The mailbox state is only visible through a reservation: take one and give it back.
  auto mailbox_open = [&] {
    if (!detail::LoopAccess::reserve_incoming_message(*receiver)) return false;
    detail::LoopAccess::release_incoming_message(*receiver);
    return true;
  };
  EXPECT_TRUE(spin_until(mailbox_open));

  int returned = 0;
  MessageBlaster blaster(
      kCount, [&](int) { return static_cast<int32_t>(::dup(original.get())); },
      [&](int32_t fd, std::error_code) {
        ::close(fd);
        ++returned;
      });
  // The sender does not run yet: its SQEs wait in its SQ, the reservations are made.
  sender->spawn([](MessageBlaster& b, EventLoop& from, EventLoop& to) -> Task<> {
    co_await b.run(from, to, kCount, /*retry_refused=*/false);
    from.stop();
  }(blaster, *sender, *receiver));
  receiver->stop();
  EXPECT_TRUE(spin_until([&] { return !mailbox_open(); }));  // the receiver is shutting down
  std::thread sender_thread([&] { sender->run(); });         // submits the 100 messages
  receiver_thread.join();
  sender_thread.join();

  EXPECT_EQ(returned, 0);
  EXPECT_EQ(handled.load(), kCount);
  EXPECT_EQ(handled_while_closing.load(), kCount);
  EXPECT_EQ(open_fd_count(), baseline) << "fds leaked";
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

struct RecordingHook : detail::PreSubmitHook {
  std::vector<std::string>* order = nullptr;
  std::string name;
};

TEST_P(LoopBackends, PreSubmitHooksRunOnceAfterTheReadyCoroutinesAndCanBeCancelled) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  std::vector<std::string> order;
  RecordingHook hook, cancelled;
  for (RecordingHook* h : {&hook, &cancelled}) {
    h->order = &order;
    h->run = [](detail::PreSubmitHook& self) noexcept {
      auto& recording = static_cast<RecordingHook&>(self);
      recording.order->push_back(recording.name);
    };
  }
  hook.name = "hook";
  cancelled.name = "cancelled";
  test::run_to_end(
      *loop,
      [](EventLoop& l, RecordingHook& h, RecordingHook& c, std::vector<std::string>& o) -> Task<> {
        detail::LoopAccess::run_before_submit(l, h);
        detail::LoopAccess::run_before_submit(l, h);  // already waiting: still runs once
        detail::LoopAccess::run_before_submit(l, c);
        detail::LoopAccess::cancel_before_submit(l, c);
        co_await YieldToReady{l};
        o.push_back("resumed");  // ready work of this iteration comes before the hook
        co_await io::sleep_for(l, std::chrono::milliseconds(1));
        o.push_back("slept");
      }(*loop, hook, cancelled, order));
  EXPECT_EQ(order, (std::vector<std::string>{"resumed", "hook", "slept"}));
}

TEST_P(LoopBackends, VectoredSendGathersBuffersIntoOneSend) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  struct Send : detail::VectoredSend {
    Send(EventLoop& l, int socket) noexcept : VectoredSend(l, socket, hook<&Send::done>) {}
    void done(int32_t r) noexcept {
      res = r;
      ++calls;
    }
    int32_t res = -1;
    int calls = 0;
  } send(*loop, pair.a.get());
  const Send& outcome = send;
  std::string received;
  test::run_to_end(*loop,
                   [](EventLoop& l, detail::VectoredSend& s, int fd, std::string& got) -> Task<> {
                     std::string first = "hello, ", second = "gathered ", third = "world";
                     iovec buffers[3] = {{first.data(), first.size()},
                                         {second.data(), second.size()},
                                         {third.data(), third.size()}};
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

// On a connection the backend knows is writable, the epoll backend sends at once: start()
// returns the result and no callback comes. io_uring always goes through the ring.
TEST_P(LoopBackends, VectoredSendOnAWritableConnectionMaySendAtOnce) {
  auto loop = make_loop(GetParam());
  ASSERT_TRUE(loop);
  SocketPair pair;
  detail::LoopAccess::attach(*loop, pair.a.get());
  struct Send : detail::VectoredSend {
    Send(EventLoop& l, int socket) noexcept : VectoredSend(l, socket, hook<&Send::done>) {}
    void done(int32_t) noexcept { ++calls; }
    int calls = 0;
  } send(*loop, pair.a.get());
  const int& calls = send.calls;
  std::optional<int32_t> at_once;
  bool started = false;
  std::string received;
  test::run_to_end(
      *loop,
      [](EventLoop& l, detail::VectoredSend& s, int fd, bool& ok, std::optional<int32_t>& now,
         std::string& got) -> Task<> {
        co_await io::sleep_for(l, std::chrono::milliseconds(1));  // a poll: the first edge is seen
        std::string first = "at ", second = "once";
        iovec buffers[2] = {{first.data(), first.size()}, {second.data(), second.size()}};
        auto result = s.start(buffers);
        if (!result) co_return;
        ok = true;
        now = *result;
        std::array<std::byte, 64> buffer{};
        while (got.size() < 7) {
          auto n = co_await io::recv(l, fd, buffer);
          if (!n || *n == 0) co_return;
          got.append(reinterpret_cast<const char*>(buffer.data()), *n);
        }
      }(*loop, send, pair.b.get(), started, at_once, received));
  detail::LoopAccess::detach(*loop, pair.a.get());
  ASSERT_TRUE(started);
  EXPECT_EQ(received, "at once");
  EXPECT_FALSE(send.in_flight());
  if (GetParam() == BackendKind::kEpoll) {
    ASSERT_TRUE(at_once.has_value());
    EXPECT_EQ(*at_once, 7);
    EXPECT_EQ(calls, 0);
  } else {
    EXPECT_FALSE(at_once.has_value());
    EXPECT_EQ(calls, 1);
  }
}

}  // namespace
}  // namespace ucp
