#include "ucp/io/Operations.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <liburing.h>

#include "ucp/io/FixedBuffers.h"

#include "BufferRing.h"
#include "IoUring.h"

namespace ucp::io {
namespace {

static_assert(sizeof(KernelTimespec) == sizeof(__kernel_timespec));

// Takes `n` SQEs for one operation, or completes it at once with an error: the loop is
// shutting down (ECANCELED) or the SQ and the pending queue are both full (EAGAIN).
template <unsigned N>
bool take_sqes(EventLoop& loop, IoContext& context, io_uring_sqe* (&sqes)[N]) noexcept {
  if (loop.io_closed()) {
    context.result = -ECANCELED;
    return false;
  }
  if (!loop.ring().acquire(sqes, N)) {
    context.result = -EAGAIN;
    return false;
  }
  return true;
}

// One contiguous send. Bytes inside a registered buffer (an echoed receive() lease) go out
// with WRITE_FIXED, which has write(2) semantics: no MSG_NOSIGNAL, so EventLoop::create
// ignored SIGPIPE for us. Otherwise MSG_NOSIGNAL: a reset peer gives EPIPE, never SIGPIPE (#28).
void prep_send_one(EventLoop& loop, io_uring_sqe* sqe, int fd, const void* data,
                   size_t length) noexcept {
  FixedBuffers* fixed = loop.fixed_buffers();
  if (int index = fixed ? fixed->index_of(data, length) : -1; index >= 0) {
    io_uring_prep_write_fixed(sqe, fd, data, static_cast<unsigned>(length), 0, index);
  } else {
    io_uring_prep_send(sqe, fd, data, length, MSG_NOSIGNAL);
  }
}

}  // namespace

LinkedTimeoutOperation::LinkedTimeoutOperation(EventLoop& loop, uint32_t timeout_ms) noexcept
    : Operation(loop), timeout_(KernelTimespec::from_ms(timeout_ms)), timeout_ms_(timeout_ms) {
  op_.owner = this;
  timer_.owner = this;
  op_.on_cqe = &on_part;
  timer_.on_cqe = &on_part;
}

std::coroutine_handle<> LinkedTimeoutOperation::on_part(IoContext& part, int32_t res,
                                                        uint32_t flags) noexcept {
  part.result = res;
  part.cqe_flags = flags;
  auto* self = static_cast<Part&>(part).owner;
  return --self->remaining_ == 0 ? self->waiter_ : std::coroutine_handle<>{};
}

int32_t LinkedTimeoutOperation::combined_result() const noexcept {
  if (op_.result == -ECANCELED && timeout_ms_ > 0 && timer_.result == -ETIME) return -ETIMEDOUT;
  return op_.result;
}

bool RecvOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (buffer_.empty()) {  // 0 from recv must mean EOF and nothing else
    op_.result = -EINVAL;
    return false;
  }
  waiter_ = caller;
  auto prepare = [this](io_uring_sqe* sqe) {
    if (fixed_index_ >= 0) {
      io_uring_prep_read_fixed(sqe, fd_, buffer_.data(), static_cast<unsigned>(buffer_.size()), 0,
                               fixed_index_);
    } else {
      io_uring_prep_recv(sqe, fd_, buffer_.data(), buffer_.size(), 0);
    }
  };
  if (timeout_ms_ == 0) {
    io_uring_sqe* sqes[1];
    if (!take_sqes(loop_, op_, sqes)) return false;
    prepare(sqes[0]);
    io_uring_sqe_set_data(sqes[0], &op_);
    remaining_ = 1;
    return true;
  }
  // Both SQEs at once: a flush between them would submit the recv without its timer.
  io_uring_sqe* sqes[2];
  if (!take_sqes(loop_, op_, sqes)) return false;
  prepare(sqes[0]);
  sqes[0]->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data(sqes[0], &op_);
  // timeout_ is a member: the kernel reads it at submit time, while this frame is alive.
  io_uring_prep_link_timeout(sqes[1], reinterpret_cast<__kernel_timespec*>(&timeout_), 0);
  io_uring_sqe_set_data(sqes[1], &timer_);
  remaining_ = 2;
  return true;
}

Result<size_t> RecvOp::await_resume() const noexcept { return bytes_from_cqe(combined_result()); }

bool SendOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  // MSG_NOSIGNAL: a peer that reset the connection gives EPIPE, never SIGPIPE (#28).
  io_uring_prep_send(sqes[0], fd_, data_.data(), data_.size(), MSG_NOSIGNAL);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

SendAllOp::SendAllOp(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept
    : Operation(loop), fd_(fd), data_(data) {
  send_context_.owner = this;
  send_context_.on_cqe = &on_send;
}

bool SendAllOp::start(std::coroutine_handle<> caller) noexcept {
  send_context_.waiter = caller;
  if (data_.empty()) {
    context_.result = 0;
    return false;
  }
  if (!submit_next()) {
    context_.result = send_context_.result;
    return false;
  }
  return true;
}

bool SendAllOp::submit_next() noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, send_context_, sqes)) return false;
  prep_send_one(loop_, sqes[0], fd_, data_.data() + sent_, data_.size() - sent_);
  io_uring_sqe_set_data(sqes[0], &send_context_);
  return true;
}

std::coroutine_handle<> SendAllOp::on_send(IoContext& context, int32_t res, uint32_t) noexcept {
  auto* self = static_cast<Context&>(context).owner;
  if (res > 0) {
    self->sent_ += static_cast<size_t>(res);
    // A short send: the rest goes out from here, without waking the coroutine.
    if (self->sent_ < self->data_.size() && self->submit_next()) return {};
    if (self->sent_ < self->data_.size()) res = self->send_context_.result;  // refused
  } else if (res == 0) {
    res = -EPIPE;  // nothing sent of a non-empty buffer: the peer is gone
  }
  self->context_.result = res > 0 ? 0 : res;
  return context.waiter;
}

VectoredSend::VectoredSend(EventLoop& loop, int fd, void* owner, OnComplete on_complete) noexcept
    : loop_(loop), fd_(fd), owner_(owner), on_complete_(on_complete) {
  context_.owner = this;
  context_.on_cqe = &on_cqe;
}

Result<void> VectoredSend::start(std::span<const iovec> buffers) noexcept {
  size_t count = std::min(buffers.size(), kMaxBuffers);
  if (count == 0) return Unexpected{std::errc::invalid_argument};
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return Unexpected{error_from_errno(-context_.result)};
  if (count == 1) {
    prep_send_one(loop_, sqes[0], fd_, buffers[0].iov_base, buffers[0].iov_len);
  } else {
    if (!gather_) gather_ = make_pooled<Gather>();
    std::copy_n(buffers.begin(), count, gather_->buffers);
    gather_->message = msghdr{};
    gather_->message.msg_iov = gather_->buffers;
    gather_->message.msg_iovlen = count;
    io_uring_prep_sendmsg(sqes[0], fd_, &gather_->message, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data(sqes[0], &context_);
  in_flight_ = true;
  return {};
}

std::coroutine_handle<> VectoredSend::on_cqe(IoContext& context, int32_t res, uint32_t) noexcept {
  auto* self = static_cast<Context&>(context).owner;
  self->in_flight_ = false;
  self->gather_.reset();                  // the kernel is done with the iovecs
  self->on_complete_(self->owner_, res);  // may free `self`'s owner: touch nothing after
  return {};
}

void request_cancel(EventLoop& loop, const IoContext& target) noexcept {
  if (loop.io_closed()) return;
  io_uring_sqe* sqes[1];
  if (!loop.ring().acquire(sqes, 1)) return;
  io_uring_prep_cancel(sqes[0], const_cast<IoContext*>(&target), 0);
  io_uring_sqe_set_data(sqes[0], nullptr);
}

bool ReadOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (buffer_.empty()) {
    context_.result = -EINVAL;
    return false;
  }
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_read(sqes[0], fd_, buffer_.data(), static_cast<unsigned>(buffer_.size()), offset_);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

bool WriteOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_write(sqes[0], fd_, data_.data(), static_cast<unsigned>(data_.size()), offset_);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

bool AcceptOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_accept(sqes[0], listen_fd_, reinterpret_cast<sockaddr*>(&peer_), &peer_len_,
                       SOCK_CLOEXEC);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

Result<Accepted> AcceptOp::await_resume() noexcept {
  if (context_.result < 0) return Unexpected{error_from_errno(-context_.result)};
  return Accepted{UniqueFd(context_.result), peer_};
}

ConnectOp::ConnectOp(EventLoop& loop, int fd, const sockaddr* address, socklen_t length) noexcept
    : Operation(loop), fd_(fd), length_(std::min<socklen_t>(length, sizeof(sockaddr_storage))) {
  std::memcpy(&address_, address, length_);
}

bool ConnectOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_connect(sqes[0], fd_, reinterpret_cast<sockaddr*>(&address_), length_);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

bool CloseOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (loop_.io_closed()) {  // the ring no longer takes work: close directly
    context_.result = ::close(fd_) == 0 ? 0 : -errno;
    return false;
  }
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) {
    context_.result = ::close(fd_) == 0 ? 0 : -errno;  // never leak the fd
    return false;
  }
  context_.waiter = caller;
  io_uring_prep_close(sqes[0], fd_);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

bool CancelFdOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_cancel_fd(sqes[0], fd_, IORING_ASYNC_CANCEL_ALL);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

Result<size_t> CancelFdOp::await_resume() const noexcept {
  if (context_.result == -ENOENT) return size_t{0};  // nothing was in flight
  return bytes_from_cqe(context_.result);
}

bool SleepOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) return false;
  context_.waiter = caller;
  io_uring_prep_timeout(sqes[0], reinterpret_cast<__kernel_timespec*>(&timeout_), 0, 0);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

Result<void> SleepOp::await_resume() const noexcept {
  if (context_.result == -ETIME) return {};  // the timer expired: success
  return void_from_cqe(context_.result);
}

}  // namespace ucp::io

namespace ucp::io {

MultishotRecv::MultishotRecv(EventLoop& loop, int fd) noexcept : loop_(loop), fd_(fd) {
  context_.owner = this;
  context_.on_cqe = &on_cqe;
}

MultishotRecv::~MultishotRecv() {
  // Buffers still queued go back to the ring: none may leak on any path (PITFALLS #6).
  BufferRing* ring = loop_.buffer_ring();
  for (size_t i = head_; i < queue_.size(); ++i) ring->recycle(queue_[i].buffer_id);
}

bool MultishotRecv::arm() noexcept {
  if (armed_ || eof_ || error_ != 0) return armed_;
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) {
    error_ = context_.result;
    return false;
  }
  io_uring_prep_recv_multishot(sqes[0], fd_, nullptr, 0, 0);
  sqes[0]->flags |= IOSQE_BUFFER_SELECT;
  sqes[0]->buf_group = loop_.buffer_ring()->group_id();
  io_uring_sqe_set_data(sqes[0], &context_);
  armed_ = true;
  throttled_ = false;
  out_of_buffers_ = false;
  return true;
}

void MultishotRecv::cancel() noexcept {
  if (armed_) request_cancel(loop_, context_);
}

std::coroutine_handle<> MultishotRecv::on_cqe(IoContext& context, int32_t res,
                                              uint32_t flags) noexcept {
  auto* self = static_cast<Context&>(context).owner;
  BufferRing* ring = self->loop_.buffer_ring();
  if (res > 0 && (flags & IORING_CQE_F_BUFFER)) {
    auto id = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
    ring->note_taken();
    self->queue_.push_back({id, static_cast<uint32_t>(res), 0});
    ++self->queued_;
    if (self->queued_ >= kMaxQueued && !self->throttled_) {
      self->throttled_ = true;
      ++self->pauses_;
      self->cancel();
    }
  } else if (res == 0) {
    self->eof_ = true;
  } else if (res == -ENOBUFS) {
    self->out_of_buffers_ = true;  // the ring ran dry; not an error of this connection
  } else if (res == -ECANCELED && self->throttled_) {
    // Our own back-pressure cancel: re-armed once the reader drains the queue.
  } else if (res < 0) {
    self->error_ = res;
  }
  if (!(flags & IORING_CQE_F_MORE)) {
    self->armed_ = false;
    // Ended with nothing to report: our own pause (its cancel completed after the reader had
    // drained the queue and began to wait again), or the kernel stopping the receive for its
    // own reasons. The reader must never see that: resume receiving and keep it waiting. The
    // owner still counts one receive in flight, so on_final does not run.
    if (self->waiter_ && !self->has_news() && self->arm()) return {};
    if (self->on_final_) self->on_final_(self->hook_owner_);
  }
  if (self->waiter_ && self->out_of_buffers_ && self->queued_ == 0 && !self->eof_ &&
      self->error_ == 0 && self->on_starved_) {
    self->out_of_buffers_ = false;
    self->waiter_ = {};
    return self->on_starved_(self->hook_owner_);
  }
  // A reader resumes only with news: data, EOF (a real FIN), an error (a real one).
  if (!self->has_news()) return {};
  return std::exchange(self->waiter_, {});
}

BufferLease MultishotRecv::lend_front() noexcept {
  BufferRing* ring = loop_.buffer_ring();
  Chunk& chunk = queue_[head_];
  BufferLease lease =
      BufferLease::from_ring(loop_, chunk.buffer_id, ring->buffer(chunk.buffer_id) + chunk.offset,
                             chunk.length - chunk.offset);
  ++head_;
  if (--queued_ == 0) {
    queue_.clear();
    head_ = 0;
  }
  return lease;
}

size_t MultishotRecv::copy_out(std::span<std::byte> destination) noexcept {
  BufferRing* ring = loop_.buffer_ring();
  size_t copied = 0;
  while (queued_ > 0 && copied < destination.size()) {
    Chunk& chunk = queue_[head_];
    size_t n = std::min<size_t>(chunk.length - chunk.offset, destination.size() - copied);
    std::memcpy(destination.data() + copied, ring->buffer(chunk.buffer_id) + chunk.offset, n);
    copied += n;
    chunk.offset += static_cast<uint32_t>(n);
    if (chunk.offset == chunk.length) {
      ring->recycle(chunk.buffer_id);
      ++head_;
      --queued_;
    }
  }
  if (queued_ == 0) {  // steady state: the vector keeps its capacity, nothing is allocated
    queue_.clear();
    head_ = 0;
  }
  return copied;
}

}  // namespace ucp::io

namespace ucp::io {

MultishotAccept::MultishotAccept(EventLoop& loop, int listen_fd, void* owner,
                                 OnAccept on_accept) noexcept
    : loop_(loop), listen_fd_(listen_fd), owner_(owner), on_accept_(on_accept) {
  context_.owner = this;
  context_.on_cqe = &on_cqe;
}

bool MultishotAccept::await_suspend(std::coroutine_handle<> caller) noexcept {
  last_error_ = 0;
  io_uring_sqe* sqes[1];
  if (!take_sqes(loop_, context_, sqes)) {
    last_error_ = context_.result;
    return false;
  }
  context_.waiter = caller;
  io_uring_prep_multishot_accept(sqes[0], listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data(sqes[0], &context_);
  return true;
}

std::coroutine_handle<> MultishotAccept::on_cqe(IoContext& context, int32_t res,
                                                uint32_t flags) noexcept {
  auto* self = static_cast<Context&>(context).owner;
  if (res >= 0) {
    self->on_accept_(self->owner_, res);
  } else {
    self->last_error_ = res;
  }
  if (flags & IORING_CQE_F_MORE) return {};
  return context.waiter;  // ended: the owner decides whether and when to re-arm
}

}  // namespace ucp::io

namespace ucp::io {

RingMessage::RingMessage(void* owner, OnSent on_sent) noexcept : owner_(owner), on_sent_(on_sent) {
  context_.owner = this;
  context_.on_cqe = &on_cqe;
}

Result<void> RingMessage::send(EventLoop& from, EventLoop& target, int32_t value) noexcept {
  if (!from.features().msg_ring) return Unexpected{std::errc::operation_not_supported};
  if (from.io_closed()) return Unexpected{std::errc::operation_canceled};
  if (!target.reserve_incoming_message()) return Unexpected{std::errc::connection_refused};
  io_uring_sqe* sqes[1];
  if (!from.ring().acquire(sqes, 1)) {
    target.release_incoming_message();
    return Unexpected{std::errc::resource_unavailable_try_again};
  }
  target_ = &target;
  value_ = value;
  in_flight_ = true;
  // The target's CQE: user_data = its message context, res = the value. No CQE_SKIP: our
  // own CQE is the only way to learn that the value did not arrive.
  io_uring_prep_msg_ring(sqes[0], target.ring_fd(), static_cast<unsigned>(value),
                         reinterpret_cast<uint64_t>(target.message_context()), 0);
  io_uring_sqe_set_data(sqes[0], &context_);
  return {};
}

std::coroutine_handle<> RingMessage::on_cqe(IoContext& context, int32_t res, uint32_t) noexcept {
  auto* self = static_cast<Context&>(context).owner;
  self->in_flight_ = false;
  if (res < 0) self->target_->release_incoming_message();  // it will never arrive there
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

}  // namespace ucp::io
