#pragma once
// Backend: what an EventLoop needs from the kernel interface it runs on (private to io/).
// Two implementations: uring/UringBackend (io_uring, the fast path) and epoll/EpollBackend
// (readiness-based, for hosts where io_uring is blocked). Both complete the same operations
// (io/detail/Operation.h) with the same results and completion flags, so everything above io/ runs
// unchanged on either.
//
// Contract for implementations:
// - submit() only records or prepares; nothing completes before the next poll(). try_now()
//   is the one exception, and says so: it performs an operation that cannot wait, or nothing.
// - Every submitted operation gets exactly one final completion (without kCompletionMore),
//   including after cancel() and cancel_all(); in_flight() counts those still due.
// - Completions are delivered by calling deliver() from poll(), in the order the backend
//   learns of them; a completion callback may free the operation (it was the last one).
//
// Thread contract: the owning loop's thread only (created anywhere).

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <string>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/IoContext.h"
#include "ucp/io/detail/Operation.h"

namespace ucp::detail {

class ReceiveBuffers;

/// Resumptions collected while completions are delivered.
using ReadyList = std::vector<std::coroutine_handle<>>;

inline void deliver(IoContext* context, int32_t res, uint32_t flags, ReadyList& ready) {
  if (context == nullptr) return;  // completions nobody waits for (cancels, linked timers)
  if (auto next = context->on_complete(*context, res, flags)) ready.push_back(next);
}

class Backend {
 public:
  virtual ~Backend() = default;

  /// Loop thread, once, before anything is submitted.
  virtual Result<void> enable() = 0;
  /// See LoopAccess::submit. Refusals set op.result (-EAGAIN: no room).
  virtual bool submit(Operation& op) noexcept = 0;
  /// See LoopAccess::try_now. The default can never perform at once.
  virtual bool try_now(Operation& /*op*/) noexcept { return false; }
  virtual void cancel(Operation& op) noexcept = 0;
  /// Starts what was submitted, then waits for completions: not at all when `block` is
  /// false, at most `timeout` when it is not negative, and delivers them (at most `limit`,
  /// 0 = all that are ready).
  virtual void poll(bool block, std::chrono::nanoseconds timeout, ReadyList& ready,
                    uint32_t limit) = 0;
  /// Shutdown: asks every operation in flight to end.
  virtual void cancel_all() noexcept = 0;
  virtual uint64_t in_flight() const noexcept = 0;

  virtual void attach(int /*fd*/) noexcept {}
  virtual void detach(int /*fd*/) noexcept {}

  virtual ReceiveBuffers* receive_buffers() noexcept = 0;
  /// A registered buffer for one read, if the backend has one free (io_uring fixed buffers).
  virtual BufferLease borrow_registered_buffer() noexcept { return {}; }
  virtual void release_registered_buffer(uint16_t /*index*/) noexcept {}

  virtual BackendKind kind() const noexcept = 0;
  virtual const char* name() const noexcept = 0;
  virtual std::string describe() const = 0;
  const LoopCapabilities& capabilities() const noexcept { return capabilities_; }
  const LoopStats& stats() const noexcept { return stats_; }
  LoopStats& stats() noexcept { return stats_; }  // the loop counts its own (busy polls)

 protected:
  LoopCapabilities capabilities_;
  LoopStats stats_;
};

}  // namespace ucp::detail
