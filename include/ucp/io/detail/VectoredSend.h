#pragma once
// VectoredSend: the send of a connection's output queue (net/detail/StreamWriter.h). One send
// of up to kMaxBuffers buffers as a single operation, owned by an object rather than a
// coroutine frame. Plumbing: programs write with TcpConnection::write / write_all.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <sys/socket.h>
#include <sys/uio.h>

#include "ucp/base/Hook.h"
#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp::detail {

/// A connection's output queue keeps one in flight (overlapping sends
/// on one socket can reorder bytes) and is called back with the result, bytes sent (possibly
/// fewer than offered) or -errno: its owner holds it as a base and makes the callback with
/// hook<&Owner::f> (ucp/base/Hook.h). One buffer goes out as a send, several as one sendmsg (a
/// gather, so many small writes cost one operation). The buffers, and this object, must live
/// until the callback.
///
/// It is its own operation descriptor (a private base) rather than holding one that points
/// back at it: every connection carries one, and the pointer would be 8 bytes of each.
class VectoredSend : private Operation {
 public:
  static constexpr size_t kMaxBuffers = 16;
  using OnComplete = void (*)(VectoredSend& self, int32_t res) noexcept;

  VectoredSend(EventLoop& loop, int socket_fd, OnComplete callback) noexcept;
  VectoredSend(const VectoredSend&) = delete;
  VectoredSend& operator=(const VectoredSend&) = delete;

  /// Starts the send of `buffers` (at most kMaxBuffers are taken) with the loop's batch, or
  /// sends them at once where the backend can without waiting (LoopAccess::try_now): then the
  /// value is the send's result (bytes, or -errno) and no callback comes. std::nullopt: in
  /// flight, the callback reports. Refused, with nothing in flight: operation_canceled once
  /// the loop is shutting down, resource_unavailable_try_again when there is no submission room.
  Result<std::optional<int32_t>> start(std::span<const iovec> buffers) noexcept;
  bool in_flight() const noexcept { return in_flight_; }
  /// Asks for the send in flight to end early (its callback still runs).
  void cancel() noexcept;
  EventLoop& loop() const noexcept { return loop_; }
  int fd() const noexcept { return Operation::fd; }

 private:
  friend HookAccess;
  std::coroutine_handle<> on_done(int32_t res, uint32_t completion) noexcept;
  Operation& op() noexcept { return *this; }

  EventLoop& loop_;
  OnComplete on_complete_;
  // The kernel may read these after submission (SQPOLL, or a send punted to a worker).
  // Borrowed from the pool only for a gathering send, so an idle connection holds none.
  struct Gather {
    msghdr message{};
    iovec buffers[kMaxBuffers]{};
  };
  PoolPtr<Gather> gather_;
  bool in_flight_ = false;
};

}  // namespace ucp::detail
