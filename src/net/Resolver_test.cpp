// Resolver: real lookups of "localhost", errors as ResolveErrc, and the hard parts with a lookup
// the test holds: cancellation while the thread is still inside it, a loop that is gone before
// the answer comes, a bounded queue, and a resolver destroyed with lookups waiting.

#include "ucp/net/Resolver.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "ucp/io/WithTimeout.h"

#include "LoopRunner.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using test::make_loop;
using test::run_to_end;

/// A lookup that blocks until the test opens it (bounded: 10 s), then answers 127.0.0.1.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  std::atomic<int> entered{0};
  std::atomic<int> finished{0};

  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    changed.notify_all();
  }
  ResolverOptions options(uint32_t threads = 1, uint32_t capacity = 16) {
    ResolverOptions o;
    o.threads = threads;
    o.queue_capacity = capacity;
    o.lookup = [this](const std::string&, uint16_t port, int, std::vector<InetAddress>& out) {
      entered.fetch_add(1);
      std::unique_lock lock(mutex);
      changed.wait_for(lock, 10s, [this] { return open; });
      out.push_back(*InetAddress::parse("127.0.0.1", port));
      finished.fetch_add(1);
      return 0;
    };
    return o;
  }
  /// Bounded wait (on any thread) until the thread is inside `count` lookups.
  bool wait_entered(int count) {
    for (int i = 0; i < 10000 && entered.load() < count; ++i) std::this_thread::sleep_for(1ms);
    return entered.load() >= count;
  }
  bool wait_finished(int count) {
    for (int i = 0; i < 10000 && finished.load() < count; ++i) std::this_thread::sleep_for(1ms);
    return finished.load() >= count;
  }
};

Task<> wait_until_entered(EventLoop& loop, Gate& gate, int count) {
  for (int i = 0; i < 10000 && gate.entered.load() < count; ++i) {
    co_await io::sleep_for(loop, 1ms);
  }
}

TEST(Resolver, ResolvesLocalhostOnOneThread) {
  auto loop = make_loop();
  Resolver resolver;
  Result<Resolver::Addresses> answer = Unexpected{std::errc::invalid_argument};
  run_to_end(*loop, [](EventLoop& l, Resolver& r, Result<Resolver::Addresses>& out) -> Task<> {
    out = co_await r.resolve(l, "localhost", 8080);
  }(*loop, resolver, answer));
  ASSERT_TRUE(answer) << answer.error().message();
  ASSERT_FALSE(answer->empty());
  const auto v4 = *InetAddress::parse("127.0.0.1", 8080);
  const auto v6 = *InetAddress::parse("::1", 8080);
  for (const InetAddress& a : *answer) {
    EXPECT_TRUE(a == v4 || a == v6) << a.to_string();
    EXPECT_EQ(a.port(), 8080);
  }
  EXPECT_EQ(resolver.threads_started(), 1u);
}

TEST(Resolver, FailuresAreResolveErrorsWithGaiStrerrorMessages) {
  ResolverOptions options;
  options.lookup = [](const std::string& host, uint16_t, int, std::vector<InetAddress>&) {
    if (host == "system") {
      errno = EMFILE;
      return EAI_SYSTEM;
    }
    return host == "again" ? EAI_AGAIN : EAI_NONAME;
  };
  Resolver resolver(std::move(options));
  auto loop = make_loop();
  std::error_code none, again, system;
  run_to_end(*loop,
             [](EventLoop& l, Resolver& r, std::error_code& a, std::error_code& b,
                std::error_code& c) -> Task<> {
               a = (co_await r.resolve(l, "no.such.name", 80)).error();
               b = (co_await r.resolve(l, "again", 80)).error();
               c = (co_await r.resolve(l, "system", 80)).error();
             }(*loop, resolver, none, again, system));
  EXPECT_EQ(none, ResolveErrc::kHostNotFound);
  EXPECT_EQ(none.category().name(), std::string("resolve"));
  EXPECT_EQ(none.message(), ::gai_strerror(EAI_NONAME));
  EXPECT_EQ(again, ResolveErrc::kTryAgain);
  EXPECT_EQ(system, std::errc::too_many_files_open);  // EAI_SYSTEM carries errno
}

TEST(Resolver, ARealUnknownNameFails) {
  // ".invalid" never resolves (RFC 2606). Whether the name server answers NXDOMAIN or is
  // unreachable, the error is a resolve error, or timed_out at the bound.
  auto loop = make_loop();
  Resolver resolver;
  Result<Resolver::Addresses> answer = Unexpected{std::errc::invalid_argument};
  run_to_end(*loop, [](EventLoop& l, Resolver& r, Result<Resolver::Addresses>& out) -> Task<> {
    out = co_await with_timeout(r.resolve(l, "ucp-test.invalid", 80), 15s);
  }(*loop, resolver, answer));
  ASSERT_FALSE(answer);
  EXPECT_TRUE(answer.error().category() == resolve_category() ||
              answer.error() == std::errc::timed_out)
      << answer.error().message();
}

TEST(Resolver, CancellingResumesAtOnceAndTheLateAnswerIsDropped) {
  Gate gate;
  Resolver resolver(gate.options());
  auto loop = make_loop();
  StopSource stop;
  Result<Resolver::Addresses> answer = Unexpected{std::errc::invalid_argument};
  run_to_end(*loop,
             [](EventLoop& l, Resolver& r, Gate& g, StopSource& s,
                Result<Resolver::Addresses>& out) -> Task<> {
               l.spawn([](EventLoop& l2, Gate& g2, StopSource& s2) -> Task<> {
                 co_await wait_until_entered(l2, g2, 1);
                 s2.request_stop();  // the thread is inside the lookup now
               }(l, g, s));
               out = co_await with_stop(r.resolve(l, "held", 80), s.token());
             }(*loop, resolver, gate, stop, answer));
  EXPECT_EQ(answer.error(), std::errc::operation_canceled);
  EXPECT_EQ(gate.finished.load(), 0);  // resumed while the lookup was still running
  loop.reset();                        // the loop is gone before the answer: nothing posts to it
  gate.release();
  EXPECT_TRUE(gate.wait_finished(1));
}

TEST(Resolver, ALookupOutlivesTheStoppedLoopWhoseCoroutineWaitedForIt) {
  Gate gate;
  Resolver resolver(gate.options());
  {
    auto loop = make_loop();
    loop->spawn([](Resolver& r, EventLoop& l) -> Task<> {
      (void)co_await r.resolve(l, "held", 80);
      ADD_FAILURE() << "resumed although its loop stopped";
    }(resolver, *loop));
    run_to_end(*loop, [](EventLoop& l, Gate& g) -> Task<> {
      co_await wait_until_entered(l, g, 1);
    }(*loop, gate));
  }  // the waiting frame was destroyed with the loop's shutdown, then the loop itself
  gate.release();
  EXPECT_TRUE(gate.wait_finished(1));
}

TEST(Resolver, TimesOutThroughWithTimeout) {
  Gate gate;
  Resolver resolver(gate.options());
  auto loop = make_loop();
  Result<Resolver::Addresses> answer = Unexpected{std::errc::invalid_argument};
  run_to_end(*loop, [](EventLoop& l, Resolver& r, Result<Resolver::Addresses>& out) -> Task<> {
    out = co_await with_timeout(r.resolve(l, "held", 80), 20ms);
  }(*loop, resolver, answer));
  EXPECT_EQ(answer.error(), std::errc::timed_out);
  gate.release();
}

TEST(Resolver, TheQueueIsBounded) {
  Gate gate;
  Resolver resolver(gate.options(/*threads=*/1, /*capacity=*/1));
  auto loop = make_loop();
  Result<Resolver::Addresses> first = Unexpected{std::errc::invalid_argument};
  Result<Resolver::Addresses> second = Unexpected{std::errc::invalid_argument};
  Result<Resolver::Addresses> third = Unexpected{std::errc::invalid_argument};
  auto lookup = [](EventLoop& l, Resolver& r, Result<Resolver::Addresses>& out) -> Task<> {
    out = co_await r.resolve(l, "held", 80);
  };
  run_to_end(*loop,
             [](EventLoop& l, Resolver& r, Gate& g, auto& start, Result<Resolver::Addresses>& a,
                Result<Resolver::Addresses>& b, Result<Resolver::Addresses>& c) -> Task<> {
               l.spawn(start(l, r, a));
               co_await wait_until_entered(l, g, 1);  // the one thread holds the first lookup
               l.spawn(start(l, r, b));               // waits in the queue (capacity 1)
               EXPECT_EQ(r.queued(), 1u);
               c = co_await r.resolve(l, "held", 80);  // refused at once
               EXPECT_EQ(c.error(), std::errc::resource_unavailable_try_again);
               g.release();
               for (int i = 0; i < 10000 && !b; ++i) co_await io::sleep_for(l, 1ms);
             }(*loop, resolver, gate, lookup, first, second, third));
  EXPECT_TRUE(first);
  EXPECT_TRUE(second);
  EXPECT_EQ(resolver.threads_started(), 1u);
}

TEST(Resolver, DestroyedWithLookupsWaitingEndsThemCancelled) {
  Gate gate;
  auto resolver = std::make_unique<Resolver>(gate.options(1, 16));
  auto loop = make_loop();
  Result<Resolver::Addresses> first = Unexpected{std::errc::invalid_argument};
  Result<Resolver::Addresses> second = Unexpected{std::errc::invalid_argument};
  bool first_done = false;
  bool second_done = false;
  std::thread destroyer;
  auto lookup = [](EventLoop& l, Resolver& r, const char* name, Result<Resolver::Addresses>& out,
                   bool& done) -> Task<> {
    out = co_await r.resolve(l, name, 80);
    done = true;
  };
  run_to_end(*loop,
             [](EventLoop& l, std::unique_ptr<Resolver>& r, Gate& g, std::thread& d, auto& start,
                Result<Resolver::Addresses>& a, bool& a_done, Result<Resolver::Addresses>& b,
                bool& b_done) -> Task<> {
               l.spawn(start(l, *r, "held", a, a_done));
               co_await wait_until_entered(l, g, 1);
               l.spawn(start(l, *r, "queued", b, b_done));
               EXPECT_EQ(r->queued(), 1u);
               // The destructor (on another thread) drops the queued lookup, then waits for the one
               // in progress, which the gate lets finish shortly after.
               d = std::thread([&r, &g] {
                 std::thread opener([&g] {
                   std::this_thread::sleep_for(50ms);
                   g.release();
                 });
                 r.reset();
                 opener.join();
               });
               for (int i = 0; i < 10000 && !(a_done && b_done); ++i)
                 co_await io::sleep_for(l, 1ms);
             }(*loop, resolver, gate, destroyer, lookup, first, first_done, second, second_done));
  destroyer.join();
  EXPECT_TRUE(first) << first.error().message();
  EXPECT_EQ(second.error(), std::errc::operation_canceled);
}

}  // namespace
}  // namespace ucp
