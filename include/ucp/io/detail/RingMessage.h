#pragma once
// RingMessage: one 32-bit value on its way from this loop to another, ring to ring
// (IORING_OP_MSG_RING, io_uring 5.18+; LoopCapabilities::ring_messages). The kernel posts a
// completion straight into the target's ring, whose handler gets the value
// (LoopAccess::set_message_handler): no queue, no eventfd, no lock. The target's mailbox
// counts messages on their way so that it never shuts down before they arrive. On the epoll
// backend send() is refused with operation_not_supported: use EventLoop::post.
//
// The sending loop learns the outcome from its own completion: `on_sent` runs there with
// success, or with the error (target CQ overflow, target gone...), and then the value was NOT
// delivered: whatever it stands for (an fd) is still the sender's, so that the sender can
// take another way. Owned by the sender, which holds it as a base (on_sent is made with
// hook<&Sender::f>, ucp/base/Hook.h) and keeps it alive until on_sent has run; it can be sent
// again afterwards. Thread contract: the sending loop's thread only.

#include <coroutine>
#include <cstdint>

#include "ucp/base/Hook.h"
#include "ucp/base/Result.h"
#include "ucp/io/detail/Operation.h"

namespace ucp::detail {

class RingMessage : private Operation {
 public:
  using OnSent = void (*)(RingMessage& message, Result<void> delivered) noexcept;
  explicit RingMessage(OnSent on_sent) noexcept;
  RingMessage(const RingMessage&) = delete;
  RingMessage& operator=(const RingMessage&) = delete;

  /// Prepares the message (the loop submits it with the iteration's batch). On error nothing
  /// was sent and on_sent will not run: operation_not_supported (no ring messages on this
  /// backend or kernel), connection_refused (the target takes no messages: no handler yet, or
  /// shutting down), operation_canceled (`from` is shutting down), resource_unavailable_try_again
  /// (no submission room).
  Result<void> send(EventLoop& from, EventLoop& target, int32_t value) noexcept;
  EventLoop* target() const noexcept { return target_; }
  int32_t value() const noexcept { return value_; }
  bool in_flight() const noexcept { return in_flight_; }

 private:
  friend HookAccess;
  std::coroutine_handle<> on_done(int32_t res, uint32_t completion) noexcept;
  Operation& op() noexcept { return *this; }

  OnSent on_sent_;
  EventLoop* target_ = nullptr;
  int32_t value_ = 0;
  bool in_flight_ = false;
};

/// Awaitable RingMessage: resumes once the sender's completion says whether the value reached
/// the target (see RingMessage::send for the errors that come without one).
class [[nodiscard]] SendMessageOp : private RingMessage {
 public:
  SendMessageOp(EventLoop& loop, EventLoop& target, int32_t value) noexcept;
  SendMessageOp(const SendMessageOp&) = delete;
  SendMessageOp& operator=(const SendMessageOp&) = delete;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept { return result_; }

 private:
  friend HookAccess;
  void on_sent(Result<void> delivered) noexcept;

  EventLoop& loop_;
  EventLoop& target_;
  int32_t value_;
  Result<void> result_;
  std::coroutine_handle<> waiter_;
};

inline SendMessageOp send_message(EventLoop& loop, EventLoop& target, int32_t value) noexcept {
  return SendMessageOp(loop, target, value);
}

}  // namespace ucp::detail
