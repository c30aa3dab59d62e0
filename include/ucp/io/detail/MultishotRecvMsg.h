#pragma once
// MultishotRecvMsg: a datagram socket's incoming datagrams as a queue, filled by one
// long-lived receive into the loop's receive buffers, one datagram per buffer (io_uring: a
// multishot recvmsg on the provided-buffer ring; epoll: recvmmsg into free buffers each time
// the socket turns readable). Each buffer holds the datagram as io/detail/DatagramLayout.h draws
// it; pop() lends the payload without a copy, with the source address beside it.
//
// The reader asks for news with wait(); it is resumed with datagrams or an error. Underneath,
// as in MultishotRecv:
//
// - Back-pressure: past kMaxQueued datagrams the receive is paused (cancelled) so a flood
//   cannot take all of the loop's buffers; it resumes when the reader waits again. Datagrams
//   the socket cannot hold meanwhile are dropped by the kernel (UDP; counted in its
//   statistics), never by this queue.
// - A dry pool (ENOBUFS): the reader is served by one ordinary recvmsg into a pool block.
// - The receive ending for no reason the reader needs to hear of (a pause): it is started
//   again.
//
// Errors are per datagram, not the end of the stream: a connected socket reports an ICMP error
// (ECONNREFUSED) once, take_error() hands it over, and the next wait() receives again.
//
// The owner must not destroy it while busy(); stop() ends it and `on_idle` says when.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <sys/socket.h>

#include "ucp/io/BufferLease.h"
#include "ucp/io/Datagram.h"
#include "ucp/io/detail/DatagramLayout.h"
#include "ucp/io/detail/Operation.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

class MultishotRecvMsg {
 public:
  static constexpr size_t kMaxQueued = 128;

  MultishotRecvMsg(EventLoop& loop, int fd) noexcept;
  MultishotRecvMsg(const MultishotRecvMsg&) = delete;
  MultishotRecvMsg& operator=(const MultishotRecvMsg&) = delete;
  /// Gives back every buffer still queued. Requires !busy().
  ~MultishotRecvMsg();

  /// Whether `loop` can serve this stream from its receive buffers with room for a payload of
  /// `max_payload` bytes (else the owner receives one datagram at a time itself).
  static bool fits(EventLoop& loop, uint32_t max_payload) noexcept;

  /// Resumes `reader` once there is news (a datagram or an error), starting or resuming the
  /// receive as needed. False when there is news already.
  bool wait(std::coroutine_handle<> reader) noexcept;
  void drop_waiter() noexcept { waiter_ = {}; }
  /// Ends the receive for good; queued datagrams stay readable, a reader waiting resumes (with
  /// error() -ECANCELED). Its last completion still arrives.
  void stop() noexcept;

  bool has_data() const noexcept { return queued_ > 0; }
  size_t queued() const noexcept { return queued_; }
  /// -errno of an error not yet taken, or 0.
  int32_t error() const noexcept { return error_; }
  /// Returns error() and clears it: the next wait() receives again.
  int32_t take_error() noexcept;
  bool busy() const noexcept { return state_ != State::kIdle; }
  uint64_t pauses() const noexcept { return pauses_; }
  /// Datagrams that arrived cut (MSG_TRUNC) so far.
  uint64_t truncated() const noexcept { return truncated_; }
  /// Times the loop's buffers ran out under this receive (each: one recvmsg into a pool block).
  uint64_t dry_runs() const noexcept { return dry_runs_; }

  /// Hands the oldest datagram over. Requires has_data().
  ReceivedDatagram pop() noexcept;

  void set_on_idle(void* owner, void (*on_idle)(void*) noexcept) noexcept {
    owner_ = owner;
    on_idle_ = on_idle;
  }

 private:
  enum class State : uint8_t { kIdle, kArmed, kPausing, kFallback };
  struct Entry {
    uint16_t buffer_id;  // kPoolEntry: fallback_datagram_
    uint32_t used;
  };
  static constexpr uint16_t kPoolEntry = 0xFFFF;
  struct Receive : Operation {
    MultishotRecvMsg* owner = nullptr;
  };

  bool has_news() const noexcept { return queued_ > 0 || error_ != 0; }
  bool start() noexcept;
  void became_idle() noexcept;
  void recycle(const Entry& entry) noexcept;
  static std::coroutine_handle<> on_receive(IoContext& context, int32_t res,
                                            uint32_t flags) noexcept;
  static std::coroutine_handle<> on_fallback(IoContext& context, int32_t res,
                                             uint32_t flags) noexcept;

  EventLoop& loop_;
  Receive receive_;
  msghdr shape_{};  // the multishot receive's name and control capacities
  Receive fallback_;
  msghdr fallback_message_{};
  iovec fallback_vector_{};
  ReceivedDatagram fallback_datagram_;
  std::vector<Entry> queue_;
  size_t head_ = 0;
  size_t queued_ = 0;
  std::coroutine_handle<> waiter_;
  void* owner_ = nullptr;
  void (*on_idle_)(void*) noexcept = nullptr;
  uint64_t pauses_ = 0;
  uint64_t truncated_ = 0;
  uint64_t dry_runs_ = 0;
  int32_t error_ = 0;
  State state_ = State::kIdle;
  bool pool_dry_ = false;
  bool stopped_ = false;
};

}  // namespace ucp::detail
