// resolver_micro: what resolving a host name costs a loop, three ways (all for "localhost",
// answered from /etc/hosts, so the figures are the mechanism's cost, not a name server's):
//
//   GetaddrinfoOnTheLoop   getaddrinfo(3) called on the loop thread: the cost when it blocks
//                          the loop (what Resolver exists to avoid).
//   ResolverRoundTrip      ucp::Resolver: the lookup on a pool thread, the answer posted back,
//                          the coroutine resumed on its loop.
//   GetaddrinfoA           glibc getaddrinfo_a(3) with SIGEV_THREAD, whose notification posts
//                          the resumption to the loop: the alternative Resolver was measured
//                          against.
// Each iteration is one lookup awaited by a coroutine on a running loop. Real time is the
// latency of one lookup; CPU time is the whole process's (every thread), i.e. what one lookup
// costs the machine.

#include <csignal>
#include <cstring>

#include <benchmark/benchmark.h>
#include <netdb.h>

#include "ucp/io/EventLoop.h"
#include "ucp/net/Resolver.h"

namespace ucp {
namespace {

constexpr const char* kName = "localhost";

/// Runs `body(state)` as a coroutine on a fresh loop until it finishes.
template <class Body>
void on_loop(benchmark::State& state, Body body) {
  auto loop = EventLoop::create(LoopOptions{});
  if (!loop) {
    state.SkipWithError(loop.error().message().c_str());
    return;
  }
  EventLoop& l = **loop;
  l.spawn([](EventLoop& l2, benchmark::State& s, Body b) -> Task<> {
    co_await b(l2, s);
    l2.stop();
  }(l, state, std::move(body)));
  l.run();
}

void GetaddrinfoOnTheLoop(benchmark::State& state) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  for (auto _ : state) {
    addrinfo* list = nullptr;
    if (::getaddrinfo(kName, nullptr, &hints, &list) != 0) {
      state.SkipWithError("getaddrinfo failed");
      break;
    }
    ::freeaddrinfo(list);
  }
}
BENCHMARK(GetaddrinfoOnTheLoop)->UseRealTime()->MeasureProcessCPUTime();

void ResolverRoundTrip(benchmark::State& state) {
  Resolver resolver;
  on_loop(state, [&resolver](EventLoop& loop, benchmark::State& s) -> Task<> {
    for (auto _ : s) {
      auto addresses = co_await resolver.resolve(loop, kName, 80);
      if (!addresses) {
        s.SkipWithError(addresses.error().message().c_str());
        break;
      }
      benchmark::DoNotOptimize(addresses->data());
    }
  });
}
BENCHMARK(ResolverRoundTrip)->UseRealTime()->MeasureProcessCPUTime();

/// One getaddrinfo_a lookup whose SIGEV_THREAD notification posts the resumption to the loop.
class GaiAwaiter {
 public:
  explicit GaiAwaiter(EventLoop& loop) : loop_(loop) {
    hints_.ai_socktype = SOCK_STREAM;
    request_.ar_name = kName;
    request_.ar_request = &hints_;
  }
  ~GaiAwaiter() {
    if (request_.ar_result != nullptr) ::freeaddrinfo(request_.ar_result);
  }
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) {
    caller_ = caller;
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD;
    event.sigev_value.sival_ptr = this;
    event.sigev_notify_function = [](sigval value) {
      auto* self = static_cast<GaiAwaiter*>(value.sival_ptr);
      self->loop_.post([h = self->caller_] { h.resume(); });
    };
    gaicb* list[1] = {&request_};
    return ::getaddrinfo_a(GAI_NOWAIT, list, 1, &event) == 0;
  }
  int await_resume() const noexcept { return ::gai_error(const_cast<gaicb*>(&request_)); }

 private:
  EventLoop& loop_;
  addrinfo hints_{};
  gaicb request_{};
  std::coroutine_handle<> caller_;
};

void GetaddrinfoA(benchmark::State& state) {
  on_loop(state, [](EventLoop& loop, benchmark::State& s) -> Task<> {
    for (auto _ : s) {
      if (co_await GaiAwaiter(loop) != 0) {
        s.SkipWithError("getaddrinfo_a failed");
        break;
      }
    }
  });
}
BENCHMARK(GetaddrinfoA)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace
}  // namespace ucp
