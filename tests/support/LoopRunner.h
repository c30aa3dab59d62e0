#pragma once
// Test helpers for coroutines on an EventLoop: run a body to its end on the calling thread with
// a watchdog, so that a test that hangs fails instead (every wait is bounded).

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"

#include "Backends.h"

namespace ucp::test {

/// A loop on the backend under test (Backends.h: backend_under_test).
inline std::unique_ptr<EventLoop> make_loop(uint32_t provided_buffers = 0) {
  LoopOptions options;
  options.backend = backend_under_test();
  options.ring_entries = 256;
  options.provided_buffers_count = provided_buffers;
  auto loop = EventLoop::create(options);
  EXPECT_TRUE(loop) << loop.error().message();
  return loop ? std::move(*loop) : nullptr;
}

/// Runs `body` on `loop` (this thread) until it finishes; the loop then stops. Fails the test
/// if it has not finished within `limit` (the loop is stopped anyway and its frames destroyed).
inline void run_to_end(EventLoop& loop, Task<> body,
                       std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  bool finished = false;
  loop.spawn([](EventLoop& l, Task<> inner, bool& done) -> Task<> {
    co_await std::move(inner);
    done = true;
    l.stop();
  }(loop, std::move(body), finished));
  if (!finished) {
    loop.spawn([](EventLoop& l, std::chrono::milliseconds d) -> Task<> {
      co_await io::sleep_for(l, d);
      l.stop();
    }(loop, limit));
    loop.run();
  }
  EXPECT_TRUE(finished) << "the test body did not finish within " << limit.count() << " ms";
}

}  // namespace ucp::test
