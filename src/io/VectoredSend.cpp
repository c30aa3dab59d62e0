#include "ucp/io/detail/VectoredSend.h"

#include <algorithm>

#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

VectoredSend::VectoredSend(EventLoop& loop, int socket_fd, void* owner,
                           OnComplete callback) noexcept
    : loop_(loop), owner_(owner), on_complete_(callback) {
  op().fd = socket_fd;
  op().on_complete = &on_done;
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

std::coroutine_handle<> VectoredSend::on_done(IoContext& context, int32_t res, uint32_t) noexcept {
  auto* self = static_cast<VectoredSend*>(static_cast<Operation*>(&context));
  self->in_flight_ = false;
  self->gather_.reset();                  // the kernel is done with the iovecs
  self->on_complete_(self->owner_, res);  // may free `self`'s owner: touch nothing after
  return {};
}

}  // namespace ucp::detail
