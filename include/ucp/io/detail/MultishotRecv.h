#pragma once
// MultishotRecv: a socket's incoming bytes as a queue of received chunks, filled by one
// long-lived receive into the loop's receive buffers (io_uring: a multishot recv on the
// provided-buffer ring; epoll: a recv into a free buffer each time the socket turns
// readable). Idle connections hold no buffer, and steady traffic needs no operation per read.
//
// The reader asks for news with wait(); it is resumed with data, the peer's FIN, or a real
// error, and never with anything else. Two things happen underneath, invisible to it:
//
// - Back-pressure: past kMaxQueued chunks the receive is paused (cancelled) so a peer that
//   sends faster than the handler reads cannot take the loop's buffers; it resumes when the
//   reader waits again. Whether the pause completes before or after the reader drained the
//   queue, no byte is lost or reordered and no pause reads as EOF.
// - A dry pool: when the loop's buffers run out (the receive ends with ENOBUFS), the reader
//   is served by one ordinary receive into a pool block instead of spinning; the next wait
//   resumes the multishot receive.
//
// The owner must not destroy the stream while busy(); stop() ends it and `on_idle` says when.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ucp/io/BufferLease.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

/// The receive's descriptor is a private base rather than a member pointing back here: every
/// connection carries one, and the pointer would be 8 bytes of each.
class MultishotRecv : private Operation {
 public:
  static constexpr size_t kMaxQueued = 8;

  MultishotRecv(EventLoop& loop, int socket_fd) noexcept;
  MultishotRecv(const MultishotRecv&) = delete;
  MultishotRecv& operator=(const MultishotRecv&) = delete;
  /// Gives back every buffer still queued. Requires !busy().
  ~MultishotRecv();

  /// Resumes `reader` once there is news (data, EOF or an error), starting or resuming the
  /// receive as needed. False when there is news already (nothing to wait for).
  bool wait(std::coroutine_handle<> reader) noexcept;
  /// Forgets a waiting reader without resuming it (its owner resumes it another way).
  void drop_waiter() noexcept { waiter_ = {}; }
  /// A reader waits for news. False once a completion has handed it to the loop to resume,
  /// which happens before it runs: whoever would resume it another way must not then.
  bool has_waiter() const noexcept { return static_cast<bool>(waiter_); }
  /// Ends the receive for good; queued data stays readable. Its last completion still arrives.
  void stop() noexcept;

  bool has_data() const noexcept { return queued_ > 0; }
  bool at_eof() const noexcept { return eof_; }
  /// -errno of the error that ended the stream, or 0.
  int32_t error() const noexcept { return error_; }
  /// An operation of the stream is in flight.
  bool busy() const noexcept { return state_ != State::kIdle; }
  /// Times the receive paused because the reader was kMaxQueued chunks behind.
  uint64_t pauses() const noexcept { return pauses_; }
  EventLoop& loop() const noexcept { return loop_; }
  int fd() const noexcept { return Operation::fd; }

  /// Copies queued bytes into `destination`, recycling emptied buffers.
  size_t copy_out(std::span<std::byte> destination) noexcept;
  /// Hands the oldest queued chunk over without copying. Requires has_data().
  BufferLease lend_front() noexcept;

  /// `on_idle(owner)` runs whenever the stream's last operation in flight has completed.
  void set_on_idle(void* owner, void (*on_idle)(void*) noexcept) noexcept {
    owner_ = owner;
    on_idle_ = on_idle;
  }
  /// The owner given to set_on_idle (a connection finds itself from its reader through it).
  void* owner() const noexcept { return owner_; }
  /// Runs that callback now: for an owner that reads without the stream too (single-shot
  /// reads on a loop without receive buffers) and reports their end the same way.
  void notify_idle() const noexcept {
    if (on_idle_) on_idle_(owner_);
  }

 private:
  enum class State : uint8_t {
    kIdle,      // nothing in flight
    kArmed,     // the multishot receive is running
    kPausing,   // it was cancelled for back-pressure; its last completion is due
    kFallback,  // one ordinary receive into a pool block is running (the pool ran dry)
  };
  struct Chunk {
    uint16_t buffer_id;  // kPoolChunk: the bytes are in fallback_->buffer
    uint32_t length;
    uint32_t offset;
  };
  static constexpr uint16_t kPoolChunk = 0xFFFF;
  struct Receive : Operation {
    MultishotRecv* owner = nullptr;
  };
  /// The ordinary receive that stands in while the loop's buffers are dry, and its block.
  struct Fallback {
    Receive op;
    BufferLease buffer;
  };

  bool has_news() const noexcept { return queued_ > 0 || eof_ || error_ != 0; }
  /// Starts the multishot receive, or the pool fallback after ENOBUFS. False: error_ says why.
  bool start() noexcept;
  void became_idle() noexcept;
  std::byte* chunk_bytes(const Chunk& chunk) noexcept;
  void recycle(const Chunk& chunk) noexcept;
  void pop_front() noexcept;
  bool make_fallback() noexcept;  // false: error_ says why
  static std::coroutine_handle<> on_receive(IoContext& context, int32_t res,
                                            uint32_t flags) noexcept;
  static std::coroutine_handle<> on_fallback(IoContext& context, int32_t res,
                                             uint32_t flags) noexcept;

  Operation& receive() noexcept { return *this; }

  EventLoop& loop_;
  // Made on the first ENOBUFS and kept from then on: a connection that never sees the loop's
  // buffers run dry (nearly all) does not carry a second operation while it idles.
  PoolPtr<Fallback> fallback_;
  // Received, not yet consumed. Growable because a multishot receive can post a burst of
  // completions before a pause takes effect; never larger than the pool, whose buffers it names.
  std::vector<Chunk> queue_;
  uint32_t head_ = 0;  // 32 bits: the queue names loop buffers, never billions of them
  uint32_t queued_ = 0;
  std::coroutine_handle<> waiter_;
  void* owner_ = nullptr;
  void (*on_idle_)(void*) noexcept = nullptr;
  uint64_t pauses_ = 0;
  int32_t error_ = 0;
  State state_ = State::kIdle;
  bool eof_ = false;
  bool pool_dry_ = false;  // the last receive ended with ENOBUFS: serve the next from the pool
  bool stopped_ = false;
};

}  // namespace ucp::detail
