#include "ucp/coro/Task.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pthread.h>

#include "ucp/coro/SpawnGroup.h"

namespace ucp {
namespace {

// A hand-driven event: tasks suspend on it and the test resumes them.
struct ManualEvent {
  std::coroutine_handle<> waiter;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { waiter = h; }
  void await_resume() const noexcept {}
  void fire() { std::exchange(waiter, {}).resume(); }
};

Task<int> answer(std::vector<std::string>& log) {
  log.push_back("answer");
  co_return 42;
}

Task<int> add_one(std::vector<std::string>& log) {
  log.push_back("add_one start");
  int value = co_await answer(log);
  log.push_back("add_one end");
  co_return value + 1;
}

Task<> root(std::vector<std::string>& log, int& out) {
  out = co_await add_one(log);
  log.push_back("root end");
}

TEST(Task, IsLazyAndRunsNestedAwaitsInOrder) {
  std::vector<std::string> log;
  int out = 0;
  SpawnGroup group;
  Task<> task = root(log, out);
  EXPECT_TRUE(log.empty());  // lazy: nothing ran yet
  group.spawn(std::move(task));
  EXPECT_EQ(out, 43);
  EXPECT_EQ(log, (std::vector<std::string>{"add_one start", "answer", "add_one end", "root end"}));
  EXPECT_EQ(group.size(), 0u);  // finished spawned frames free themselves
}

Task<int> thrower() {
  throw std::runtime_error("boom");
  co_return 0;
}

Task<> catcher(std::string& caught) {
  try {
    co_await thrower();
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
}

TEST(Task, ExceptionsPropagateThroughCoAwait) {
  std::string caught;
  SpawnGroup group;
  group.spawn(catcher(caught));
  EXPECT_EQ(caught, "boom");
}

TEST(Task, UnhandledExceptionInSpawnedTaskGoesToTheGroupHandler) {
  static int reported = 0;
  SpawnGroup group([](std::exception_ptr) noexcept { ++reported; });
  group.spawn([]() -> Task<> { co_await thrower(); }());
  EXPECT_EQ(reported, 1);
  EXPECT_EQ(group.size(), 0u);
}

struct DestructionProbe {
  int& count;
  ~DestructionProbe() { ++count; }
};

Task<> wait_forever(ManualEvent& event, int& destroyed) {
  DestructionProbe probe{destroyed};
  co_await event;
}

TEST(Task, DestroyingASuspendedSpawnedTaskFreesItsFrames) {
  int destroyed = 0;
  ManualEvent event;
  {
    SpawnGroup group;
    group.spawn(wait_forever(event, destroyed));
    EXPECT_EQ(group.size(), 1u);
    EXPECT_EQ(destroyed, 0);
  }  // ~SpawnGroup destroys the suspended wrapper, which destroys the inner Task
  EXPECT_EQ(destroyed, 1);
}

TEST(Task, DroppingAnUnstartedTaskFreesItsFrame) {
  int destroyed = 0;
  ManualEvent event;
  { Task<> never_started = wait_forever(event, destroyed); }
  EXPECT_EQ(destroyed, 0);  // the body never ran, so the probe was never constructed
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, 0);
}

Task<int> suspend_then_value(ManualEvent& event, int value) {
  co_await event;
  co_return value;
}

Spawned spawned_waiter(ManualEvent& event, int& destroyed, bool& finished) {
  DestructionProbe probe{destroyed};
  co_await event;
  finished = true;
}

TEST(Spawned, RunsAtSpawnAndFreesItsFrameWhenItEnds) {
  int destroyed = 0;
  bool finished = false;
  ManualEvent event;
  SpawnGroup group;
  Spawned spawned = spawned_waiter(event, destroyed, finished);
  EXPECT_FALSE(event.waiter);  // lazy
  group.spawn(std::move(spawned));
  EXPECT_TRUE(event.waiter);  // ran up to its first suspension
  EXPECT_EQ(group.size(), 1u);
  event.fire();
  EXPECT_TRUE(finished);
  EXPECT_EQ(destroyed, 1);
  EXPECT_EQ(group.size(), 0u);
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, 0);
}

TEST(Spawned, TheGroupDestroysItWhileSuspendedAndDroppingItUnspawnedFreesIt) {
  int destroyed = 0;
  bool finished = false;
  ManualEvent event;
  {
    SpawnGroup group;
    group.spawn(spawned_waiter(event, destroyed, finished));
    group.spawn(spawned_waiter(event, destroyed, finished));  // beside a wrapped Task
    group.spawn(wait_forever(event, destroyed));
    EXPECT_EQ(group.size(), 3u);
  }
  EXPECT_FALSE(finished);
  EXPECT_EQ(destroyed, 3);
  { Spawned never_spawned = spawned_waiter(event, destroyed, finished); }
  EXPECT_EQ(destroyed, 3);  // its body never ran
  EXPECT_EQ(MemoryPool::thread_stats().outstanding, 0);
}

TEST(Spawned, AnExceptionGoesToTheGroupHandler) {
  static int reported = 0;
  SpawnGroup group([](std::exception_ptr) noexcept { ++reported; });
  group.spawn([]() -> Spawned { co_await thrower(); }());
  EXPECT_EQ(reported, 1);
  EXPECT_EQ(group.size(), 0u);
}

TEST(Task, ResumesTheAwaiterWhenTheChildCompletesLater) {
  ManualEvent event;
  int out = 0;
  SpawnGroup group;
  group.spawn(
      [](ManualEvent& e, int& o) -> Task<> { o = co_await suspend_then_value(e, 7); }(event, out));
  EXPECT_EQ(out, 0);
  event.fire();
  EXPECT_EQ(out, 7);
  EXPECT_EQ(group.size(), 0u);
}

Task<int> deep(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await deep(n - 1);
}

// Coroutines nest like function calls: a chain of awaits is as deep on the stack as it is long.
TEST(Task, NestedSynchronousChainsCompleteAsFunctionCallsWould) {
  int out = 0;
  SpawnGroup group;
  group.spawn([](int& o) -> Task<> { o = co_await deep(2000); }(out));
  EXPECT_EQ(out, 2000);
}

Task<int> one() { co_return 1; }

Task<> sum_many(int count, long& out) {
  for (int i = 0; i < count; ++i) out += co_await one();  // each completes without suspending
}

// A loop awaiting children that complete at once (pipelined requests answered from one
// read, messages from one buffer) runs in constant stack, also without tail calls: run on a
// thread with a 256 KiB stack, a million iterations would overflow it by far otherwise.
TEST(Task, ALoopOfSynchronousCompletionsUsesConstantStack) {
  long out = 0;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 256 * 1024);
  pthread_t thread;
  auto body = [](void* arg) -> void* {
    SpawnGroup group;
    group.spawn(sum_many(1'000'000, *static_cast<long*>(arg)));
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attributes, body, &out), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  EXPECT_EQ(out, 1'000'000);
}

}  // namespace
}  // namespace ucp
