#include "ucp/io/detail/RingMessage.h"

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

RingMessage::RingMessage(OnSent on_sent) noexcept : on_sent_(on_sent) {
  op().code = OpCode::kRingMessage;
  op().on_complete = hook<&RingMessage::on_done>;
}

Result<void> RingMessage::send(EventLoop& from, EventLoop& target, int32_t value) noexcept {
  if (!from.capabilities().ring_messages || !target.capabilities().ring_messages) {
    return Unexpected{std::errc::operation_not_supported};
  }
  if (from.io_closed()) return Unexpected{std::errc::operation_canceled};
  if (!detail::LoopAccess::reserve_incoming_message(target))
    return Unexpected{std::errc::connection_refused};
  op().aux = &target;
  op().size = static_cast<uint32_t>(value);
  if (!detail::LoopAccess::submit(from, op())) {
    detail::LoopAccess::release_incoming_message(target);
    return Unexpected{error_from_errno(-op().result)};
  }
  target_ = &target;
  value_ = value;
  in_flight_ = true;
  return {};
}

std::coroutine_handle<> RingMessage::on_done(int32_t res, uint32_t) noexcept {
  in_flight_ = false;
  if (res < 0)
    detail::LoopAccess::release_incoming_message(*target_);  // it will never arrive there
  on_sent_(*this, void_from_cqe(res));
  return {};
}

SendMessageOp::SendMessageOp(EventLoop& loop, EventLoop& target, int32_t value) noexcept
    : RingMessage(hook<&SendMessageOp::on_sent>), loop_(loop), target_(target), value_(value) {}

bool SendMessageOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  result_ = send(loop_, target_, value_);
  if (!result_) return false;
  waiter_ = caller;
  return true;
}

void SendMessageOp::on_sent(Result<void> delivered) noexcept {
  result_ = delivered;
  loop_.schedule(waiter_);
}

}  // namespace ucp::detail
