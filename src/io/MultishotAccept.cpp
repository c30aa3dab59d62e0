#include "ucp/io/detail/MultishotAccept.h"

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

MultishotAccept::MultishotAccept(EventLoop& loop, int listen_fd, OnAccept on_accept) noexcept
    : loop_(loop), on_accept_(on_accept) {
  op().code = OpCode::kAcceptMultishot;
  op().fd = listen_fd;
  op().on_complete = hook<&MultishotAccept::on_done>;
}

bool MultishotAccept::await_suspend(std::coroutine_handle<> caller) noexcept {
  last_error_ = 0;
  op().waiter = caller;
  if (!detail::LoopAccess::submit(loop_, op())) {
    last_error_ = op().result;
    return false;
  }
  running_ = true;
  return true;
}

void MultishotAccept::cancel() noexcept {
  if (running_) detail::LoopAccess::cancel(loop_, op());
}

std::coroutine_handle<> MultishotAccept::on_done(int32_t res, uint32_t completion) noexcept {
  if (res >= 0) {
    on_accept_(*this, res);
  } else {
    last_error_ = res;
  }
  if (completion & kCompletionMore) return {};
  running_ = false;
  return op().waiter;  // ended: the owner decides whether and when to start it again
}

}  // namespace ucp::detail
