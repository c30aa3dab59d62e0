#pragma once
// Awaitable io_uring operations. Each awaiter is one in-flight operation: it lives in the
// awaiting coroutine's frame, its IoContext is the SQE's user_data, and the CQE resumes
// exactly that coroutine. `await_suspend` only prepares SQEs; the loop submits the whole
// iteration's batch with one io_uring_enter.
//
// Errors are values: every awaiter returns Result<...>, with -errno from the CQE turned
// into std::error_code in one place. Special cases:
//   - recv with a timeout: both CQEs (recv and its IORING_OP_LINK_TIMEOUT) are awaited in
//     either order before resuming, so no CQE can ever reach a dead frame; a timeout reads
//     as std::errc::timed_out, a cancel as std::errc::operation_canceled, and data that
//     arrives as the timer fires is returned, never lost (IO_URING_PITFALLS #19).
//   - a zero-length recv is refused (EINVAL) instead of submitted: 0 means EOF only (#20).
//   - when the SQ and the pending queue are both full: resource_unavailable_try_again.
//   - once the loop is shutting down: operation_canceled without touching the kernel.
//
// Thread contract: the loop's own thread only.

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/IoContext.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp::io {

class Operation {
 public:
  explicit Operation(EventLoop& loop) noexcept : loop_(loop) {}
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  bool await_ready() const noexcept { return false; }

 protected:
  EventLoop& loop_;
  IoContext context_;
};

/// An operation with an IORING_OP_LINK_TIMEOUT linked to it: resumes after both CQEs.
class LinkedTimeoutOperation : public Operation {
 public:
  LinkedTimeoutOperation(EventLoop& loop, uint32_t timeout_ms) noexcept;

 protected:
  struct Part : IoContext {
    LinkedTimeoutOperation* owner = nullptr;
  };
  static std::coroutine_handle<> on_part(IoContext& part, int32_t res, uint32_t flags) noexcept;
  /// The operation's result, refined by what the timer said.
  int32_t combined_result() const noexcept;

 public:
  /// The context a cancel must name to stop this operation (see request_cancel).
  const IoContext& operation_context() const noexcept { return op_; }

 protected:
  KernelTimespec timeout_;
  uint32_t timeout_ms_;
  Part op_;
  Part timer_;
  int remaining_ = 0;
  std::coroutine_handle<> waiter_;
};

class RecvOp : public LinkedTimeoutOperation {
 public:
  RecvOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint32_t timeout_ms) noexcept
      : LinkedTimeoutOperation(loop, timeout_ms), fd_(fd), buffer_(buffer) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept;
  /// Replaces the destination before the operation starts; `fixed_index` >= 0 names the
  /// registered buffer that holds it (the read then uses IORING_OP_READ_FIXED).
  void set_buffer(std::span<std::byte> buffer, int fixed_index = -1) noexcept {
    buffer_ = buffer;
    fixed_index_ = fixed_index;
  }

 private:
  int fd_;
  int fixed_index_ = -1;
  std::span<std::byte> buffer_;
};

class SendOp : public Operation {
 public:
  SendOp(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept
      : Operation(loop), fd_(fd), data_(data) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(context_.result); }

 private:
  int fd_;
  std::span<const std::byte> data_;
};

/// Sends all of `data`, re-submitting after short sends inside the completion handler (the
/// coroutine resumes once: all sent, or the first error). `start` may be called later than
/// construction, e.g. when the awaiter waited its turn behind another send. Bytes that lie
/// in one of the loop's registered buffers go out with IORING_OP_WRITE_FIXED.
class SendAllOp : public Operation {
 public:
  SendAllOp(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept;
  /// Prepares the first send; false if it completed at once (error in result()).
  bool start(std::coroutine_handle<> caller) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return start(caller); }
  Result<void> await_resume() const noexcept { return void_from_cqe(context_.result); }
  size_t sent() const noexcept { return sent_; }
  int32_t result() const noexcept { return context_.result; }

 private:
  static std::coroutine_handle<> on_send(IoContext& context, int32_t res, uint32_t flags) noexcept;
  bool submit_next() noexcept;
  struct Context : IoContext {
    SendAllOp* owner = nullptr;
  };
  int fd_;
  std::span<const std::byte> data_;
  size_t sent_ = 0;
  Context send_context_;
};

/// One send of up to kMaxBuffers buffers as a single SQE, owned by an object rather than a
/// coroutine frame: a connection's output queue keeps one in flight (PITFALLS #14) and is
/// called back with the CQE's result, bytes sent (possibly fewer than offered) or -errno.
/// One buffer goes out as IORING_OP_SEND, several as IORING_OP_SENDMSG (a gather, so many
/// small writes cost one SQE). The buffers, and this object, must live until the callback.
class VectoredSend {
 public:
  static constexpr size_t kMaxBuffers = 16;
  using OnComplete = void (*)(void* owner, int32_t res) noexcept;

  VectoredSend(EventLoop& loop, int fd, void* owner, OnComplete on_complete) noexcept;
  VectoredSend(const VectoredSend&) = delete;
  VectoredSend& operator=(const VectoredSend&) = delete;

  /// Prepares the send of `buffers` (at most kMaxBuffers are taken); the loop submits it
  /// with its batch. Refused, with nothing in flight: operation_canceled once the loop is
  /// shutting down, resource_unavailable_try_again when the SQ and pending queue are full.
  Result<void> start(std::span<const iovec> buffers) noexcept;
  bool in_flight() const noexcept { return in_flight_; }

 private:
  struct Context : IoContext {
    VectoredSend* owner = nullptr;
  };
  static std::coroutine_handle<> on_cqe(IoContext& context, int32_t res, uint32_t flags) noexcept;

  EventLoop& loop_;
  int fd_;
  void* owner_;
  OnComplete on_complete_;
  Context context_;
  // The kernel may read these after submission (SQPOLL, or a send punted to a worker).
  // Borrowed from the pool only for a gathering send, so an idle connection holds none.
  struct Gather {
    msghdr message{};
    iovec buffers[kMaxBuffers]{};
  };
  PoolPtr<Gather> gather_;
  bool in_flight_ = false;
};

class ReadOp : public Operation {  // files and pipes: IORING_OP_READ at `offset` (-1: current)
 public:
  ReadOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint64_t offset) noexcept
      : Operation(loop), fd_(fd), buffer_(buffer), offset_(offset) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(context_.result); }

 private:
  int fd_;
  std::span<std::byte> buffer_;
  uint64_t offset_;
};

class WriteOp : public Operation {
 public:
  WriteOp(EventLoop& loop, int fd, std::span<const std::byte> data, uint64_t offset) noexcept
      : Operation(loop), fd_(fd), data_(data), offset_(offset) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(context_.result); }

 private:
  int fd_;
  std::span<const std::byte> data_;
  uint64_t offset_;
};

struct Accepted {
  UniqueFd fd;
  sockaddr_storage peer{};
};

class AcceptOp : public Operation {
 public:
  AcceptOp(EventLoop& loop, int listen_fd) noexcept : Operation(loop), listen_fd_(listen_fd) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<Accepted> await_resume() noexcept;

 private:
  int listen_fd_;
  sockaddr_storage peer_{};
  socklen_t peer_len_ = sizeof(sockaddr_storage);
};

class ConnectOp : public Operation {
 public:
  ConnectOp(EventLoop& loop, int fd, const sockaddr* address, socklen_t length) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept { return void_from_cqe(context_.result); }

 private:
  int fd_;
  sockaddr_storage address_{};
  socklen_t length_;
};

class CloseOp : public Operation {
 public:
  CloseOp(EventLoop& loop, int fd) noexcept : Operation(loop), fd_(fd) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept { return void_from_cqe(context_.result); }

 private:
  int fd_;
};

/// Cancels every operation in flight on `fd` (IORING_ASYNC_CANCEL_FD | ALL); the value is
/// how many were found. Their own CQEs still arrive, each to its own awaiter.
class CancelFdOp : public Operation {
 public:
  CancelFdOp(EventLoop& loop, int fd) noexcept : Operation(loop), fd_(fd) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept;

 private:
  int fd_;
};

/// IORING_OP_TIMEOUT: completes after `ms`.
class SleepOp : public Operation {
 public:
  SleepOp(EventLoop& loop, uint64_t ms) noexcept
      : Operation(loop), timeout_(KernelTimespec::from_ms(ms)) {}
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept;

 private:
  KernelTimespec timeout_;
};

/// A multishot receive into the loop's provided buffer ring, owned by a connection: one SQE
/// keeps delivering data as it arrives, each CQE naming the ring buffer it filled, so idle
/// connections hold no buffer and steady traffic needs no SQE per read (PITFALLS #5, #6).
///
/// Received chunks queue here until `copy_out` consumes them (each buffer goes back to the
/// ring as soon as it is emptied). The queue is bounded: past kMaxQueued chunks the receive
/// is cancelled and re-armed only when the reader catches up, so a peer that sends faster
/// than the application reads cannot pin the ring. When the ring runs dry the kernel ends
/// the receive with ENOBUFS; `needs_fallback()` then tells the reader to do one ordinary
/// recv into its own buffer instead of spinning, and the next read re-arms.
///
/// Every CQE, including the last one (without IORING_CQE_F_MORE), must arrive before the
/// owner is destroyed: `armed()` says whether one is still due.
class MultishotRecv {
 public:
  static constexpr size_t kMaxQueued = 8;

  MultishotRecv(EventLoop& loop, int fd) noexcept;
  MultishotRecv(const MultishotRecv&) = delete;
  MultishotRecv& operator=(const MultishotRecv&) = delete;
  ~MultishotRecv();

  /// Submits the receive unless it is armed, at EOF or failed. False if the SQ and pending
  /// queue are full or the loop is closing (then error() says so).
  bool arm() noexcept;
  bool armed() const noexcept { return armed_; }
  bool has_data() const noexcept { return queued_ > 0; }
  bool at_eof() const noexcept { return eof_; }
  bool needs_fallback() const noexcept { return out_of_buffers_; }
  /// Times the receive was paused because the reader was kMaxQueued chunks behind.
  uint64_t pauses() const noexcept { return pauses_; }
  void clear_fallback() noexcept { out_of_buffers_ = false; }
  int32_t error() const noexcept { return error_; }
  /// Copies queued bytes into `destination`, recycling emptied buffers.
  size_t copy_out(std::span<std::byte> destination) noexcept;
  /// Hands the oldest queued chunk over without copying; the lease recycles its buffer.
  /// Requires has_data().
  BufferLease lend_front() noexcept;
  /// The coroutine to resume when something arrives (data, EOF, error, end of receive).
  void set_waiter(std::coroutine_handle<> waiter) noexcept { waiter_ = waiter; }
  /// Asks the kernel to stop the receive; its final CQE still arrives.
  void cancel() noexcept;
  /// Hooks for the owner: `on_final` runs with the receive's last CQE (the owner counts the
  /// receive as one in-flight operation); `on_starved` runs instead of resuming the waiter
  /// when the ring ran dry with nothing queued, so the owner can read some other way.
  void set_hooks(void* owner, void (*on_final)(void*) noexcept,
                 std::coroutine_handle<> (*on_starved)(void*) noexcept) noexcept {
    hook_owner_ = owner;
    on_final_ = on_final;
    on_starved_ = on_starved;
  }

 private:
  struct Chunk {
    uint16_t buffer_id;
    uint32_t length;
    uint32_t offset;
  };
  struct Context : IoContext {
    MultishotRecv* owner = nullptr;
  };
  static std::coroutine_handle<> on_cqe(IoContext& context, int32_t res, uint32_t flags) noexcept;
  /// Something a waiting reader must hear about: data, EOF, an error, or a dry ring.
  bool has_news() const noexcept { return queued_ > 0 || eof_ || error_ != 0 || out_of_buffers_; }

  EventLoop& loop_;
  int fd_;
  Context context_;
  // Received, not yet consumed. Growable because a multishot receive can post a burst of
  // CQEs before a cancel takes effect; never larger than the ring, whose buffers it names.
  std::vector<Chunk> queue_;
  size_t head_ = 0;
  size_t queued_ = 0;
  std::coroutine_handle<> waiter_;
  void* hook_owner_ = nullptr;
  void (*on_final_)(void*) noexcept = nullptr;
  std::coroutine_handle<> (*on_starved_)(void*) noexcept = nullptr;
  int32_t error_ = 0;
  bool armed_ = false;
  bool eof_ = false;
  bool out_of_buffers_ = false;
  bool throttled_ = false;  // cancelled because the queue was full: re-arm when drained
  uint64_t pauses_ = 0;
};

/// A multishot accept: one SQE accepts connection after connection; each new fd goes to
/// `on_accept` straight from the completion (no coroutine switch per connection). Awaiting
/// it arms it and resumes when the kernel ends it (an error, or a CQE without
/// IORING_CQE_F_MORE, e.g. on CQ overflow), so the owner can back off and await again
/// (PITFALLS #7, #8).
class MultishotAccept {
 public:
  using OnAccept = void (*)(void* owner, int fd) noexcept;
  MultishotAccept(EventLoop& loop, int listen_fd, void* owner, OnAccept on_accept) noexcept;
  MultishotAccept(const MultishotAccept&) = delete;
  MultishotAccept& operator=(const MultishotAccept&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  /// Why it ended: an error (EMFILE, ECANCELED...) or success (the kernel just stopped it).
  Result<void> await_resume() const noexcept { return void_from_cqe(last_error_); }
  const IoContext& context() const noexcept { return context_; }

 private:
  struct Context : IoContext {
    MultishotAccept* owner = nullptr;
  };
  static std::coroutine_handle<> on_cqe(IoContext& context, int32_t res, uint32_t flags) noexcept;

  EventLoop& loop_;
  int listen_fd_;
  void* owner_;
  OnAccept on_accept_;
  Context context_;
  int32_t last_error_ = 0;
};

/// One 32-bit value on its way from this loop's ring to another loop's (IORING_OP_MSG_RING,
/// 5.18+): the kernel posts a CQE into the target ring, whose handler gets the value
/// (EventLoop::set_message_handler). No queue, no eventfd, no lock; the target's mailbox
/// counts messages on their way so that it never shuts down before they arrive.
///
/// The sending loop learns the outcome from its own CQE: `on_sent` runs there with success,
/// or with the error (target CQ overflow, target gone...), and then the value was NOT
/// delivered: whatever it stands for (an fd) is still the sender's, so that the sender can
/// take another way. Owned by the sender, which keeps it alive until on_sent has run; it can
/// be sent again afterwards. Thread contract: the sending loop's thread only.
class RingMessage {
 public:
  using OnSent = void (*)(RingMessage& message, Result<void> delivered) noexcept;
  RingMessage(void* owner, OnSent on_sent) noexcept;
  RingMessage(const RingMessage&) = delete;
  RingMessage& operator=(const RingMessage&) = delete;

  /// Prepares the message (the loop submits it with the iteration's batch). On error nothing
  /// was sent and on_sent will not run: operation_not_supported (no MSG_RING in this kernel),
  /// connection_refused (the target takes no messages: no handler yet, or shutting down),
  /// operation_canceled (`from` is shutting down), resource_unavailable_try_again (SQ full).
  Result<void> send(EventLoop& from, EventLoop& target, int32_t value) noexcept;
  void* owner() const noexcept { return owner_; }
  EventLoop* target() const noexcept { return target_; }
  int32_t value() const noexcept { return value_; }
  bool in_flight() const noexcept { return in_flight_; }

 private:
  struct Context : IoContext {
    RingMessage* owner = nullptr;
  };
  static std::coroutine_handle<> on_cqe(IoContext& context, int32_t res, uint32_t flags) noexcept;

  void* owner_;
  OnSent on_sent_;
  Context context_;
  EventLoop* target_ = nullptr;
  int32_t value_ = 0;
  bool in_flight_ = false;
};

/// Awaitable RingMessage: resumes once the sender's CQE says whether the value reached the
/// target's ring (see RingMessage::send for the errors that come without a CQE).
class SendMessageOp {
 public:
  SendMessageOp(EventLoop& loop, EventLoop& target, int32_t value) noexcept;
  SendMessageOp(const SendMessageOp&) = delete;
  SendMessageOp& operator=(const SendMessageOp&) = delete;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept { return result_; }

 private:
  static void on_sent(RingMessage& message, Result<void> delivered) noexcept;

  EventLoop& loop_;
  EventLoop& target_;
  int32_t value_;
  RingMessage message_;
  Result<void> result_;
  std::coroutine_handle<> waiter_;
};

/// Fire-and-forget: asks the kernel to cancel the operation whose context is `target`.
/// The target's own CQE (-ECANCELED, or its result if it won the race) still arrives.
void request_cancel(EventLoop& loop, const IoContext& target) noexcept;

/// Reads into `buffer`; with `timeout_ms` > 0 an IORING_OP_LINK_TIMEOUT bounds the wait.
inline RecvOp recv(EventLoop& loop, int fd, std::span<std::byte> buffer,
                   uint32_t timeout_ms = 0) noexcept {
  return RecvOp(loop, fd, buffer, timeout_ms);
}
/// One send(2) with MSG_NOSIGNAL (may be short; see TcpConnection::write_all).
inline SendOp send(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept {
  return SendOp(loop, fd, data);
}
inline ReadOp read(EventLoop& loop, int fd, std::span<std::byte> buffer,
                   uint64_t offset = ~uint64_t{0}) noexcept {
  return ReadOp(loop, fd, buffer, offset);
}
inline WriteOp write(EventLoop& loop, int fd, std::span<const std::byte> data,
                     uint64_t offset = ~uint64_t{0}) noexcept {
  return WriteOp(loop, fd, data, offset);
}
inline AcceptOp accept(EventLoop& loop, int listen_fd) noexcept {
  return AcceptOp(loop, listen_fd);
}
inline ConnectOp connect(EventLoop& loop, int fd, const sockaddr* address,
                         socklen_t length) noexcept {
  return ConnectOp(loop, fd, address, length);
}
inline CloseOp close(EventLoop& loop, int fd) noexcept { return CloseOp(loop, fd); }
inline CancelFdOp cancel_fd(EventLoop& loop, int fd) noexcept { return CancelFdOp(loop, fd); }
/// Sends `value` from `loop`'s ring to `target`'s message handler (IORING_OP_MSG_RING).
inline SendMessageOp send_message(EventLoop& loop, EventLoop& target, int32_t value) noexcept {
  return SendMessageOp(loop, target, value);
}
inline SleepOp sleep_for(EventLoop& loop, std::chrono::milliseconds duration) noexcept {
  return SleepOp(loop, static_cast<uint64_t>(duration.count()));
}

}  // namespace ucp::io
