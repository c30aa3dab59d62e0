#include "ucp/io/detail/MultishotAccept.h"

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

MultishotAccept::MultishotAccept(EventLoop& loop, int listen_fd, void* owner,
                                 OnAccept on_accept) noexcept
    : loop_(loop), owner_(owner), on_accept_(on_accept) {
  op_.owner = this;
  op_.code = OpCode::kAcceptMultishot;
  op_.fd = listen_fd;
  op_.on_complete = &on_complete;
}

bool MultishotAccept::await_suspend(std::coroutine_handle<> caller) noexcept {
  last_error_ = 0;
  op_.waiter = caller;
  if (!detail::LoopAccess::submit(loop_, op_)) {
    last_error_ = op_.result;
    return false;
  }
  running_ = true;
  return true;
}

void MultishotAccept::cancel() noexcept {
  if (running_) detail::LoopAccess::cancel(loop_, op_);
}

std::coroutine_handle<> MultishotAccept::on_complete(IoContext& context, int32_t res,
                                                     uint32_t flags) noexcept {
  auto* self = static_cast<Accept&>(context).owner;
  if (res >= 0) {
    self->on_accept_(self->owner_, res);
  } else {
    self->last_error_ = res;
  }
  if (flags & kCompletionMore) return {};
  self->running_ = false;
  return context.waiter;  // ended: the owner decides whether and when to start it again
}

}  // namespace ucp::detail
