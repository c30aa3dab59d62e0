#pragma once
// resume_on: move the running coroutine to another loop's thread.
//
//   co_await ucp::resume_on(worker);     // from here on, this coroutine runs on `worker`
//   auto page = co_await fetch(...);      // uses worker's I/O
//   co_await ucp::resume_on(home);        // and back
//
// The hop is one EventLoop::post (the lock-free queue plus, when the target sleeps, an eventfd
// wake-up). On the target's own thread it is free: nothing suspends.
//
// Caveats:
// - Whoever awaits this coroutine resumes on the thread it finished on: hop back first if the
//   caller expects its own loop (its connections, timers and StopSources are single-threaded).
// - Frames come from the per-thread MemoryPool of the thread that created them. A frame freed
//   on another loop's thread is pushed onto its owner's lock-free return stack and reused by
//   the owner later: correct, but slower than a local free, so keep hopping coroutines few or
//   let them end where they began.
// - Both loops must be running until the coroutine has arrived. A coroutine spawned on loop A
//   stays in A's SpawnGroup even while it runs on B: A must not stop (destroying its spawned
//   frames) while such a coroutine may still run on B.
//
// Thread contract: awaited on any loop thread; `target` may be any loop.

#include <coroutine>

#include "ucp/io/EventLoop.h"

namespace ucp {

class [[nodiscard]] ResumeOnAwaiter {
 public:
  explicit ResumeOnAwaiter(EventLoop& target) noexcept : target_(target) {}
  bool await_ready() const noexcept { return target_.in_loop_thread(); }
  void await_suspend(std::coroutine_handle<> caller) {
    target_.post([caller] { caller.resume(); });
  }
  void await_resume() const noexcept {}

 private:
  EventLoop& target_;
};

[[nodiscard]] inline ResumeOnAwaiter resume_on(EventLoop& target) noexcept {
  return ResumeOnAwaiter(target);
}

}  // namespace ucp
