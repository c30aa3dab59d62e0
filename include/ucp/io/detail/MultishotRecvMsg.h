#pragma once
// MultishotRecvMsg: a datagram socket's incoming datagrams as a queue, filled by one
// long-lived receive into the loop's receive buffers, one datagram per buffer (io_uring: a
// multishot recvmsg on the provided-buffer ring; epoll: recvmmsg into free buffers each time
// the socket turns readable). Each buffer holds the datagram as io/detail/DatagramLayout.h draws
// it; pop() lends the payload without a copy, with the source address beside it.
//
// The reader asks for news with wait(); it is resumed with datagrams or an error. Underneath,
// the state machine it shares with MultishotRecv (io/detail/MultishotReceive.h): back-pressure
// past kMaxQueued datagrams (those the socket cannot hold meanwhile are dropped by the kernel,
// UDP, counted in its statistics, never by this queue), one ordinary recvmsg into a pool block
// when the loop's buffers run dry, and restarts the reader never hears of.
//
// Errors are per datagram, not the end of the stream: a connected socket reports an ICMP error
// (ECONNREFUSED) once, take_error() hands it over, and the next wait() receives again.
//
// Or no reader at all: after deliver_to(), each datagram goes to a handler straight from its
// completion (no queue entry, no reader resumed, its buffer back to the loop as soon as the
// handler returns), errors to an error handler, and the receive starts itself again whenever
// it ends (an error, a dry pool) until stop(). The handler may stop() the receive: what is still
// in flight is then given back unseen.
//
// The owner must not destroy it while busy(); stop() ends it.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include <sys/socket.h>

#include "ucp/base/UniqueFunction.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/Datagram.h"
#include "ucp/io/detail/DatagramLayout.h"
#include "ucp/io/detail/MultishotReceive.h"
#include "ucp/io/detail/Operation.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

class MultishotRecvMsg;

/// A queued datagram: the loop receive buffer that holds it (or the fallback's), and how many
/// bytes of it the completion filled.
struct DatagramEntry {
  uint16_t buffer_id;  // MultishotRecvMsg::kPoolEntry: the fallback's datagram
  uint32_t used;
};

/// The receive that stands in while the loop's buffers are dry (a base of MultishotRecvMsg,
/// named apart from the multishot receive's).
struct FallbackRecvMsg : Operation {};

extern template class MultishotReceive<MultishotRecvMsg, DatagramEntry>;

class MultishotRecvMsg : public MultishotReceive<MultishotRecvMsg, DatagramEntry>,
                         private FallbackRecvMsg {
 public:
  static constexpr size_t kMaxQueued = 128;
  using Handler = UniqueFunction<void(const DatagramRef&)>;
  using ErrorHandler = UniqueFunction<void(std::error_code)>;

  MultishotRecvMsg(EventLoop& loop, int socket) noexcept;
  /// Gives back every buffer still queued. Requires !busy().
  ~MultishotRecvMsg();

  /// Whether `loop` can serve this stream from its receive buffers with room for a payload of
  /// `max_payload` bytes (else the owner receives one datagram at a time itself).
  static bool fits(EventLoop& loop, uint32_t max_payload) noexcept;

  /// Ends the receive for good; queued datagrams stay readable, a reader waiting resumes (with
  /// error() -ECANCELED). Its last completion still arrives.
  void stop() noexcept;

  /// From now on every datagram goes to `handler` from its completion (see the file comment);
  /// those already queued go to it first, before this returns. `on_error` (may be empty) hears
  /// each error the receive ends with. Requires no reader waiting. False when the receive
  /// cannot start (error() says why): nothing is delivered then.
  bool deliver_to(Handler handler, ErrorHandler on_error) noexcept;
  /// deliver_to() has taken the datagrams over.
  bool delivering() const noexcept { return static_cast<bool>(handler_); }

  size_t queued() const noexcept { return queued_; }
  /// Returns error() and clears it: the next wait() receives again.
  int32_t take_error() noexcept;
  /// Datagrams that arrived cut (MSG_TRUNC) so far.
  uint64_t truncated() const noexcept { return truncated_; }
  /// Times the loop's buffers ran out under this receive (each: one recvmsg into a pool block).
  uint64_t dry_runs() const noexcept { return dry_runs_; }

  /// Hands the oldest datagram over. Requires has_data().
  ReceivedDatagram pop() noexcept {
    ReceivedDatagram out;
    pop_into(out);
    return out;
  }
  /// The same into `out`, in place: the lease `out` held is given back, the rest of it
  /// overwritten (the bytes of `source` past the address zeroed), with no ReceivedDatagram
  /// built, moved or destroyed on the way. Requires has_data().
  void pop_into(ReceivedDatagram& out) noexcept;

  // (MultishotReceive's, which FallbackRecvMsg's Operation would hide.)
  using MultishotReceive::fd;
  using MultishotReceive::loop;

 private:
  friend class MultishotReceive<MultishotRecvMsg, DatagramEntry>;
  friend HookAccess;
  static constexpr uint16_t kPoolEntry = 0xFFFF;

  // For MultishotReceive.
  bool take(int32_t res, uint32_t completion);
  bool start_fallback() noexcept;
  Operation& fallback_op() noexcept { return static_cast<FallbackRecvMsg&>(*this); }
  void ran_dry() noexcept;
  void idle() noexcept;

  void recycle(const DatagramEntry& entry) noexcept;
  std::coroutine_handle<> on_fallback(int32_t res, uint32_t completion) noexcept;
  // deliver_to()'s paths: a loop buffer's datagram, the fallback's, an error.
  void deliver(uint16_t buffer_id, uint32_t used) noexcept;
  void deliver_fallback() noexcept;
  void tell_error() noexcept;

  msghdr shape_{};  // the multishot receive's name and control capacities
  msghdr fallback_message_{};
  iovec fallback_vector_{};
  ReceivedDatagram fallback_datagram_;
  Handler handler_;
  ErrorHandler on_error_;
  uint64_t truncated_ = 0;
  uint64_t dry_runs_ = 0;
};

}  // namespace ucp::detail
