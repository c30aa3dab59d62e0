// when_all and when_any, driven by hand: tasks wait on events the test fires in a chosen order,
// and a small ready queue stands in for a loop (a stop callback only queues the resumption, as
// the loop's cancellable operations do).

#include "ucp/coro/WhenAll.h"

#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/WhenAny.h"

namespace ucp {
namespace {

struct ReadyQueue {
  std::deque<std::coroutine_handle<>> ready;
  void run() {
    while (!ready.empty()) {
      auto h = ready.front();
      ready.pop_front();
      h.resume();
    }
  }
};

/// A one-shot event; wait() resumes with true when fired, false when its token stopped it.
struct Event {
  explicit Event(ReadyQueue& q) : queue(q) {}
  ReadyQueue& queue;
  std::coroutine_handle<> waiter;
  bool fired = false;

  void fire() {
    fired = true;
    if (waiter) queue.ready.push_back(std::exchange(waiter, {}));
  }

  struct Wait {
    Event& event;
    StopToken token;
    bool stopped = false;
    struct OnStop : StopCallbackBase {
      explicit OnStop(Wait* w) noexcept : StopCallbackBase(&invoke), wait(w) {}
      static void invoke(StopCallbackBase& base) noexcept {
        Wait& w = *static_cast<OnStop&>(base).wait;
        w.stopped = true;
        if (w.event.waiter) w.event.queue.ready.push_back(std::exchange(w.event.waiter, {}));
      }
      using StopCallbackBase::attach;
      using StopCallbackBase::detach;
      Wait* wait;
    } on_stop{this};

    bool await_ready() const noexcept { return event.fired; }
    void await_suspend(std::coroutine_handle<> h) noexcept {
      event.waiter = h;
      on_stop.attach(token);
    }
    bool await_resume() noexcept {
      on_stop.detach();
      return !stopped;
    }
  };
  Wait wait(StopToken token = {}) { return Wait{*this, token, false}; }
};

Task<int> value_after(Event& event, int value, std::vector<int>& order) {
  co_await event.wait();
  order.push_back(value);
  co_return value;
}

Task<> nothing_after(Event& event) { co_await event.wait(); }

TEST(WhenAll, ResultsComeInArgumentOrderWhicheverFinishesFirst) {
  ReadyQueue queue;
  Event a{queue}, b{queue}, c{queue};
  std::vector<int> finished;
  std::tuple<int, std::monostate, int> result{};
  bool done = false;
  SpawnGroup group;
  group.spawn([](Task<std::tuple<int, std::monostate, int>> all, auto& out, bool& d) -> Task<> {
    out = co_await std::move(all);
    d = true;
  }(when_all(value_after(a, 1, finished), nothing_after(b), value_after(c, 3, finished)), result,
                                                                                     done));
  c.fire();
  queue.run();
  a.fire();
  queue.run();
  EXPECT_FALSE(done);  // b still runs
  b.fire();
  queue.run();
  ASSERT_TRUE(done);
  EXPECT_EQ(std::get<0>(result), 1);
  EXPECT_EQ(std::get<2>(result), 3);
  EXPECT_EQ(finished, (std::vector<int>{3, 1}));
}

Task<int> immediately(int value) { co_return value; }

TEST(WhenAll, TasksThatFinishAtOnceDoNotSuspendTheCaller) {
  SpawnGroup group;
  std::vector<int> result;
  bool done = false;
  std::vector<Task<int>> tasks;
  for (int i = 0; i < 5; ++i) tasks.push_back(immediately(i));
  group.spawn([](std::vector<Task<int>> t, std::vector<int>& out, bool& d) -> Task<> {
    out = co_await when_all(std::move(t));
    co_await when_all(std::vector<Task<>>{});  // nothing to wait for
    auto [x, y] = co_await when_all(immediately(7), immediately(8));
    out.push_back(x + y);
    d = true;
  }(std::move(tasks), result, done));
  EXPECT_TRUE(done);
  EXPECT_EQ(result, (std::vector<int>{0, 1, 2, 3, 4, 15}));
  EXPECT_EQ(group.size(), 0u);
}

Task<int> throw_after(Event& event) {
  co_await event.wait();
  throw std::runtime_error("child failed");
}

TEST(WhenAll, AnExceptionIsRethrownOnlyAfterEveryTaskFinished) {
  ReadyQueue queue;
  Event a{queue}, b{queue};
  std::vector<int> finished;
  std::string caught;
  SpawnGroup group;
  group.spawn([](Event& ea, Event& eb, std::vector<int>& f, std::string& out) -> Task<> {
    std::vector<Task<int>> tasks;
    tasks.push_back(throw_after(ea));
    tasks.push_back(value_after(eb, 2, f));
    try {
      (void)co_await when_all(std::move(tasks));
    } catch (const std::runtime_error& e) {
      out = e.what();
    }
  }(a, b, finished, caught));
  a.fire();
  queue.run();
  EXPECT_EQ(caught, "");  // b has not finished: when_all still waits
  b.fire();
  queue.run();
  EXPECT_EQ(caught, "child failed");
  EXPECT_EQ(finished, (std::vector<int>{2}));
}

TEST(WhenAll, VoidVectorWaitsForAll) {
  ReadyQueue queue;
  std::deque<Event> events;
  std::vector<Task<>> tasks;
  for (int i = 0; i < 10; ++i) tasks.push_back(nothing_after(events.emplace_back(queue)));
  bool done = false;
  SpawnGroup group;
  group.spawn([](std::vector<Task<>> t, bool& d) -> Task<> {
    co_await when_all(std::move(t));
    d = true;
  }(std::move(tasks), done));
  for (int i = 9; i >= 0; --i) {
    EXPECT_FALSE(done);
    events[static_cast<size_t>(i)].fire();
    queue.run();
  }
  EXPECT_TRUE(done);
}

// ---- when_any ----

/// Waits for `event` unless stopped; records how it ended.
Task<int> contender(Event& event, StopToken stop, int value, std::vector<std::string>& log) {
  const bool fired = co_await event.wait(stop);
  log.push_back(std::to_string(value) + (fired ? " fired" : " stopped"));
  co_return fired ? value : -1;
}

TEST(WhenAny, TheFirstToFinishWinsAndTheOthersAreStoppedAndAwaited) {
  ReadyQueue queue;
  Event a{queue}, b{queue}, c{queue};
  StopSource stop;
  std::vector<std::string> log;
  WhenAnyResult<int> result{};
  bool done = false;
  SpawnGroup group;
  group.spawn([](Task<WhenAnyResult<int>> race, WhenAnyResult<int>& out, bool& d,
                 std::vector<std::string>& l) -> Task<> {
    out = co_await std::move(race);
    l.push_back("when_any returned");
    d = true;
  }(when_any(stop, contender(a, stop.token(), 1, log), contender(b, stop.token(), 2, log),
                                              contender(c, stop.token(), 3, log)),
                                              result, done, log));
  b.fire();
  queue.run();
  ASSERT_TRUE(done);
  EXPECT_EQ(result.index, 1u);
  EXPECT_EQ(result.value, 2);
  EXPECT_TRUE(stop.stop_requested());
  // The losers were stopped and finished before when_any returned.
  EXPECT_EQ(log,
            (std::vector<std::string>{"2 fired", "3 stopped", "1 stopped", "when_any returned"}));
}

TEST(WhenAny, AWinnerDuringStartLeavesTheRestUnstarted) {
  ReadyQueue queue;
  Event never{queue};
  StopSource stop;
  std::vector<std::string> log;
  std::vector<Task<int>> tasks;
  tasks.push_back(contender(never, stop.token(), 1, log));
  tasks.push_back(immediately(2));
  tasks.push_back(contender(never, stop.token(), 3, log));  // never started
  WhenAnyResult<int> result{};
  SpawnGroup group;
  group.spawn([](StopSource& s, std::vector<Task<int>> t, WhenAnyResult<int>& out) -> Task<> {
    out = co_await when_any(s, std::move(t));
  }(stop, std::move(tasks), result));
  queue.run();
  EXPECT_EQ(result.index, 1u);
  EXPECT_EQ(result.value, 2);
  EXPECT_EQ(log, (std::vector<std::string>{"1 stopped"}));
  EXPECT_EQ(group.size(), 0u);
}

TEST(WhenAny, TheWinnersExceptionIsRethrown) {
  ReadyQueue queue;
  Event a{queue}, b{queue};
  StopSource stop;
  std::vector<std::string> log;
  std::string caught;
  SpawnGroup group;
  group.spawn([](StopSource& s, Event& ea, Event& eb, std::vector<std::string>& l,
                 std::string& out) -> Task<> {
    try {
      (void)co_await when_any(s, throw_after(ea), contender(eb, s.token(), 2, l));
    } catch (const std::runtime_error& e) {
      out = e.what();
    }
  }(stop, a, b, log, caught));
  a.fire();
  queue.run();
  EXPECT_EQ(caught, "child failed");
  EXPECT_EQ(log, (std::vector<std::string>{"2 stopped"}));
}

}  // namespace
}  // namespace ucp
