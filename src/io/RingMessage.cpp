#include "ucp/io/detail/RingMessage.h"

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

RingMessage::RingMessage(void* owner, OnSent on_sent) noexcept : owner_(owner), on_sent_(on_sent) {
  op_.owner = this;
  op_.code = OpCode::kRingMessage;
  op_.on_complete = &on_complete;
}

Result<void> RingMessage::send(EventLoop& from, EventLoop& target, int32_t value) noexcept {
  if (!from.capabilities().ring_messages || !target.capabilities().ring_messages) {
    return Unexpected{std::errc::operation_not_supported};
  }
  if (from.io_closed()) return Unexpected{std::errc::operation_canceled};
  if (!detail::LoopAccess::reserve_incoming_message(target))
    return Unexpected{std::errc::connection_refused};
  op_.aux = &target;
  op_.size = static_cast<uint32_t>(value);
  if (!detail::LoopAccess::submit(from, op_)) {
    detail::LoopAccess::release_incoming_message(target);
    return Unexpected{error_from_errno(-op_.result)};
  }
  target_ = &target;
  value_ = value;
  in_flight_ = true;
  return {};
}

std::coroutine_handle<> RingMessage::on_complete(IoContext& context, int32_t res,
                                                 uint32_t) noexcept {
  auto* self = static_cast<Message&>(context).owner;
  self->in_flight_ = false;
  if (res < 0)
    detail::LoopAccess::release_incoming_message(*self->target_);  // it will never arrive there
  self->on_sent_(*self, void_from_cqe(res));
  return {};
}

SendMessageOp::SendMessageOp(EventLoop& loop, EventLoop& target, int32_t value) noexcept
    : loop_(loop), target_(target), value_(value), message_(this, &on_sent) {}

bool SendMessageOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  result_ = message_.send(loop_, target_, value_);
  if (!result_) return false;
  waiter_ = caller;
  return true;
}

void SendMessageOp::on_sent(RingMessage& message, Result<void> delivered) noexcept {
  auto* self = static_cast<SendMessageOp*>(message.owner());
  self->result_ = delivered;
  self->loop_.schedule(self->waiter_);
}

}  // namespace ucp::detail
