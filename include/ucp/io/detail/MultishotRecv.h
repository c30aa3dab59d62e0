#pragma once
// MultishotRecv: a socket's incoming bytes as a queue of received chunks, filled by one
// long-lived receive into the loop's receive buffers (io_uring: a multishot recv on the
// provided-buffer ring; epoll: a recv into a free buffer each time the socket turns
// readable). Idle connections hold no buffer, and steady traffic needs no operation per read.
//
// The reader asks for news with wait(); it is resumed with data, the peer's FIN, or a real
// error, and never with anything else. Back-pressure past kMaxQueued chunks, the pool fallback
// when the loop's buffers run dry and the restarts stay invisible to it (the state machine it
// shares with MultishotRecvMsg: io/detail/MultishotReceive.h). Whether a pause completes before
// or after the reader drained the queue, no byte is lost or reordered and no pause reads as EOF.
//
// The owner must not destroy the stream while busy(); stop() ends it and `on_idle` says when
// (the owner holds the stream as a base and makes on_idle with hook<&Owner::f>,
// ucp/base/Hook.h).
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ucp/io/BufferLease.h"
#include "ucp/io/detail/MultishotReceive.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

class MultishotRecv;

/// A stretch of received bytes: a loop receive buffer (or the fallback's block) and how much of
/// it is read already.
struct StreamChunk {
  uint16_t buffer_id;  // MultishotRecv::kPoolChunk: the bytes are in the fallback's block
  uint32_t length;
  uint32_t offset;
};

extern template class MultishotReceive<MultishotRecv, StreamChunk>;

/// The receive's descriptor is a private base (of MultishotReceive) rather than a member
/// pointing back here: every connection carries one, and the pointer would be 8 bytes of each.
class MultishotRecv : public MultishotReceive<MultishotRecv, StreamChunk> {
 public:
  static constexpr size_t kMaxQueued = 8;
  /// Runs whenever the stream's last operation in flight has completed.
  using OnIdle = void (*)(MultishotRecv& self) noexcept;

  MultishotRecv(EventLoop& loop, int socket, OnIdle on_idle = nullptr) noexcept;
  /// Gives back every buffer still queued. Requires !busy().
  ~MultishotRecv();

  /// Ends the receive for good; queued data stays readable, and a reader waiting is dropped
  /// (its owner resumes it). Its last completion still arrives.
  void stop() noexcept;
  bool at_eof() const noexcept { return eof_; }

  /// Copies queued bytes into `destination`, recycling emptied buffers.
  size_t copy_out(std::span<std::byte> destination) noexcept;
  /// Hands the oldest queued chunk over without copying. Requires has_data().
  BufferLease lend_front() noexcept;

  /// Runs on_idle now: for an owner that reads without the stream too (single-shot reads on a
  /// loop without receive buffers) and reports their end the same way.
  void notify_idle() noexcept {
    if (on_idle_) on_idle_(*this);
  }

 private:
  friend class MultishotReceive<MultishotRecv, StreamChunk>;
  friend HookAccess;
  static constexpr uint16_t kPoolChunk = 0xFFFF;
  /// The ordinary receive that stands in while the loop's buffers are dry, and its block. An
  /// allocation of its own, so it keeps a pointer to its stream.
  struct Fallback : detail::Operation {
    explicit Fallback(MultishotRecv& owner) noexcept;
    std::coroutine_handle<> done(int32_t res, uint32_t completion) noexcept;
    MultishotRecv& stream;
    BufferLease buffer;
  };

  // For MultishotReceive.
  bool take(int32_t res, uint32_t completion);
  bool start_fallback() noexcept;
  detail::Operation& fallback_op() noexcept { return *fallback_; }
  void ran_dry() noexcept {}
  void idle() noexcept { notify_idle(); }

  std::byte* chunk_bytes(const StreamChunk& chunk) noexcept;
  void recycle(const StreamChunk& chunk) noexcept;
  std::coroutine_handle<> on_fallback(int32_t res) noexcept;

  // Made on the first ENOBUFS and kept from then on: a connection that never sees the loop's
  // buffers run dry (nearly all) does not carry a second operation while it idles.
  PoolPtr<Fallback> fallback_;
  OnIdle on_idle_;
};

}  // namespace ucp::detail
