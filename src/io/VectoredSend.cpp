#include "ucp/io/detail/VectoredSend.h"

#include <algorithm>

#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

VectoredSend::VectoredSend(EventLoop& loop, int socket_fd, OnComplete callback) noexcept
    : loop_(loop), on_complete_(callback) {
  op().fd = socket_fd;
  op().on_complete = hook<&VectoredSend::on_done>;
}

Result<std::optional<int32_t>> VectoredSend::start(std::span<const iovec> buffers) noexcept {
  const size_t count = std::min(buffers.size(), kMaxBuffers);
  if (count == 0) return Unexpected{std::errc::invalid_argument};
  if (count == 1) {
    op().code = OpCode::kSend;
    op().data = buffers[0].iov_base;
    op().size = static_cast<uint32_t>(std::min<size_t>(buffers[0].iov_len, UINT32_MAX));
  } else {
    if (!gather_) gather_ = make_pooled<Gather>();
    std::copy_n(buffers.begin(), count, gather_->buffers);
    gather_->message = msghdr{};
    gather_->message.msg_iov = gather_->buffers;
    gather_->message.msg_iovlen = count;
    op().code = OpCode::kSendMsg;
    op().data = &gather_->message;
  }
  if (detail::LoopAccess::try_now(loop_, op())) {
    gather_.reset();
    return std::optional<int32_t>{op().result};
  }
  if (!detail::LoopAccess::submit(loop_, op())) {
    gather_.reset();
    return Unexpected{error_from_errno(-op().result)};
  }
  in_flight_ = true;
  return std::optional<int32_t>{};
}

void VectoredSend::cancel() noexcept {
  if (in_flight_) detail::LoopAccess::cancel(loop_, op());
}

std::coroutine_handle<> VectoredSend::on_done(int32_t res, uint32_t) noexcept {
  in_flight_ = false;
  gather_.reset();           // the kernel is done with the iovecs
  on_complete_(*this, res);  // may free the owner, and this with it: touch nothing after
  return {};
}

}  // namespace ucp::detail
