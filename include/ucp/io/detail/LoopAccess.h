#pragma once
// LoopAccess: the part of EventLoop that the library's own layers use and programs do not.
// Awaiters, multishot streams, connections and the acceptors hand operations to the loop,
// register long-lived fds, borrow receive buffers, queue pre-submit hooks and pass ring
// messages through here; a program only runs, stops, posts to and spawns on a loop, and sets
// timers (io/EventLoop.h). Each function forwards to a private member of EventLoop (inline:
// no cost over a public member).
//
// Thread contract: the loop's thread unless a function says otherwise.

#include <cstdint>
#include <utility>

#include "ucp/base/UniqueFunction.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/Operation.h"

namespace ucp::detail {

/// Work a loop runs once just before it submits: after every coroutine that is ready in
/// this iteration has run. A connection gathers all that its handler wrote during the
/// iteration into one send here. The hook lives in its owner, which removes it before dying.
/// Linked while `prev` is set or it is the loop's first hook (no flag: every connection has one).
struct PreSubmitHook {
  PreSubmitHook* prev = nullptr;
  PreSubmitHook* next = nullptr;
  void (*run)(PreSubmitHook&) noexcept = nullptr;
};

struct LoopAccess {
  // ---- operations (for awaiters and io/ components) ----
  /// Hands `op` to the backend, which starts it with this iteration's batch. False when it is
  /// refused (op.result: -ECANCELED once the loop shuts down, -EAGAIN when the SQ and the
  /// pending queue are both full); nothing is in flight then and no completion follows.
  static bool submit(EventLoop& loop, Operation& op) noexcept { return loop.submit(op); }
  /// Performs `op` here and now when the backend can do so without waiting, and says so: true
  /// with the result in op.result (nothing in flight, no completion follows). Only the epoll
  /// backend ever can, for a send on a connection it knows is writable with nothing queued
  /// before it; false: nothing happened, submit() it as usual. Saves the completion's trip
  /// through the next poll (a loop iteration per echoed request).
  static bool try_now(EventLoop& loop, Operation& op) noexcept { return loop.try_now(op); }
  /// Asks the backend to end `op` early (it completes with -ECANCELED unless its result came
  /// first). Harmless when it has completed already.
  static void cancel(EventLoop& loop, Operation& op) noexcept { loop.cancel(op); }
  /// `fd` is a long-lived socket of this loop (a connection, a listener): the backend may keep
  /// per-fd state for it until detach() or an io::close() through this loop.
  static void attach(EventLoop& loop, int fd) noexcept { loop.attach(fd); }
  static void detach(EventLoop& loop, int fd) noexcept { loop.detach(fd); }

  // ---- receive buffers ----
  /// The loop's pool for multishot receives, or null when it has none.
  static ReceiveBuffers* receive_buffers(EventLoop& loop) noexcept {
    return loop.receive_buffers();
  }
  /// A buffer to receive into for one single-shot read: a registered buffer when the backend
  /// has a free one (the read then skips page pinning), else a pool block of about 4 KiB.
  static BufferLease borrow_receive_buffer(EventLoop& loop) { return loop.borrow_receive_buffer(); }

  // ---- ring messages (io/detail/RingMessage.h) ----
  /// Loop thread, or before run(). Receives the values other loops send with detail::RingMessage,
  /// on the loop thread after the completions; the loop's mailbox opens once it runs with a
  /// handler. From the start of shutdown the mailbox refuses new messages, but the loop keeps
  /// reaping until every message already on its way has arrived and calls the handler for
  /// each with io_closed() true: it must then release what the value stands for (close an fd).
  /// What the sender did before sending happens-before the handler runs.
  static void set_message_handler(EventLoop& loop, UniqueFunction<void(int32_t)> handler) {
    loop.set_message_handler(std::move(handler));
  }
  /// Any thread. Counts one message on its way to `loop`; false when the mailbox is closed.
  static bool reserve_incoming_message(EventLoop& loop) noexcept {
    return loop.reserve_incoming_message();
  }
  /// The backend did not deliver a reserved message.
  static void release_incoming_message(EventLoop& loop) noexcept {
    loop.release_incoming_message();
  }
  /// For the backend: a value another loop sent.
  static void message_arrived(EventLoop& loop, int32_t value) { loop.message_arrived(value); }

  // ---- pre-submit hooks ----
  /// Runs hook.run once before the loop next submits; adding a hook that is already waiting
  /// changes nothing.
  static void run_before_submit(EventLoop& loop, PreSubmitHook& hook) noexcept {
    loop.run_before_submit(hook);
  }
  static void cancel_before_submit(EventLoop& loop, PreSubmitHook& hook) noexcept {
    loop.cancel_before_submit(hook);
  }

  /// For io/ internals and benchmarks of a backend: the backend this loop runs on.
  static Backend& backend(EventLoop& loop) noexcept { return loop.backend(); }
};

}  // namespace ucp::detail
