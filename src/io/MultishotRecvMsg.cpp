#include "ucp/io/detail/MultishotRecvMsg.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"

#include "ReceiveBuffers.h"

namespace ucp::detail {

MultishotRecvMsg::MultishotRecvMsg(EventLoop& loop, int fd) noexcept : loop_(loop) {
  shape_.msg_namelen = kDatagramNameBytes;
  receive_.owner = this;
  receive_.code = OpCode::kRecvMsgMultishot;
  receive_.fd = fd;
  receive_.data = &shape_;
  receive_.on_complete = &on_receive;
  fallback_.owner = this;
  fallback_.code = OpCode::kRecvMsg;
  fallback_.fd = fd;
  fallback_.data = &fallback_message_;
  fallback_.on_complete = &on_fallback;
}

MultishotRecvMsg::~MultishotRecvMsg() {
  assert(!busy());
  for (size_t i = head_; i < queue_.size(); ++i) recycle(queue_[i]);
}

bool MultishotRecvMsg::fits(EventLoop& loop, uint32_t max_payload) noexcept {
  const ReceiveBuffers* buffers = detail::LoopAccess::receive_buffers(loop);
  return loop.capabilities().multishot_receive && buffers != nullptr &&
         buffers->buffer_size() >= uint64_t{kDatagramHeadroom} + max_payload;
}

void MultishotRecvMsg::recycle(const Entry& entry) noexcept {
  if (entry.buffer_id == kPoolEntry) {
    fallback_datagram_.data.reset();
  } else {
    detail::LoopAccess::receive_buffers(loop_)->recycle(entry.buffer_id);
  }
}

bool MultishotRecvMsg::wait(std::coroutine_handle<> reader) noexcept {
  if (has_news()) return false;
  waiter_ = reader;
  if (state_ == State::kIdle && !start()) {
    waiter_ = {};
    return false;  // error_ says why
  }
  return true;
}

int32_t MultishotRecvMsg::take_error() noexcept { return std::exchange(error_, 0); }

bool MultishotRecvMsg::start() noexcept {
  if (stopped_) {
    error_ = -ECANCELED;
    return false;
  }
  if (pool_dry_) {
    pool_dry_ = false;
    // The same room a loop buffer gives, so that both paths cut a datagram alike.
    const uint32_t room =
        detail::LoopAccess::receive_buffers(loop_)->buffer_size() - kDatagramHeadroom;
    if (fallback_datagram_.data.source() == BufferLease::Source::kNone) {
      fallback_datagram_.data = BufferLease::from_pool(room);
    }
    auto bytes = fallback_datagram_.data.writable();
    fallback_vector_ = {bytes.data(), bytes.size()};
    fallback_message_ = msghdr{};
    fallback_message_.msg_name = &fallback_datagram_.source;
    fallback_message_.msg_namelen = sizeof fallback_datagram_.source;
    fallback_message_.msg_iov = &fallback_vector_;
    fallback_message_.msg_iovlen = 1;
    if (!detail::LoopAccess::submit(loop_, fallback_)) {
      error_ = fallback_.result;
      fallback_datagram_.data.reset();
      return false;
    }
    state_ = State::kFallback;
    return true;
  }
  if (!detail::LoopAccess::submit(loop_, receive_)) {
    error_ = receive_.result;
    return false;
  }
  state_ = State::kArmed;
  return true;
}

void MultishotRecvMsg::stop() noexcept {
  stopped_ = true;
  if (waiter_) {  // a reader waiting hears of it now, with operation_canceled
    if (error_ == 0) error_ = -ECANCELED;
    loop_.schedule(std::exchange(waiter_, {}));
  }
  if (state_ == State::kArmed || state_ == State::kPausing)
    detail::LoopAccess::cancel(loop_, receive_);
  if (state_ == State::kFallback) detail::LoopAccess::cancel(loop_, fallback_);
}

void MultishotRecvMsg::became_idle() noexcept {
  state_ = State::kIdle;
  if (on_idle_) on_idle_(owner_);
}

std::coroutine_handle<> MultishotRecvMsg::on_receive(IoContext& context, int32_t res,
                                                     uint32_t flags) noexcept {
  auto* self = static_cast<Receive&>(context).owner;
  if (flags & kCompletionBuffer) {
    detail::LoopAccess::receive_buffers(self->loop_)->note_taken();
    self->queue_.push_back({buffer_id_of(flags), static_cast<uint32_t>(res)});
    ++self->queued_;
    if (self->queued_ >= kMaxQueued && self->state_ == State::kArmed) {
      self->state_ = State::kPausing;  // back-pressure: resumed when the reader waits again
      ++self->pauses_;
      detail::LoopAccess::cancel(self->loop_, self->receive_);
    }
  } else if (res == -ENOBUFS) {
    self->pool_dry_ = true;  // the loop's buffers ran out; not an error of this socket
    ++self->dry_runs_;
  } else if (res == -ECANCELED && (self->state_ == State::kPausing || self->stopped_)) {
    // Our own pause or stop: not news for the reader.
  } else if (res < 0) {
    self->error_ = res;
  }
  if (!(flags & kCompletionMore)) {
    self->state_ = State::kIdle;
    // Ended with nothing to report (a pause, a dry pool): the reader must never see that.
    // Receive again, keep it waiting.
    if (self->waiter_ && !self->has_news() && self->start()) return {};
    self->became_idle();
  }
  if (!self->has_news()) return {};
  return std::exchange(self->waiter_, {});
}

std::coroutine_handle<> MultishotRecvMsg::on_fallback(IoContext& context, int32_t res,
                                                      uint32_t) noexcept {
  auto* self = static_cast<Receive&>(context).owner;
  if (res >= 0) {
    ReceivedDatagram& d = self->fallback_datagram_;
    d.data.set_size(static_cast<size_t>(res));
    d.source_length = self->fallback_message_.msg_namelen;
    d.truncated = (self->fallback_message_.msg_flags & MSG_TRUNC) != 0;
    self->queue_.push_back({kPoolEntry, static_cast<uint32_t>(res)});
    ++self->queued_;
  } else {
    self->fallback_datagram_.data.reset();
    if (!(res == -ECANCELED && self->stopped_)) self->error_ = res;
  }
  self->became_idle();
  if (!self->has_news()) return {};
  return std::exchange(self->waiter_, {});
}

ReceivedDatagram MultishotRecvMsg::pop() noexcept {
  const Entry entry = queue_[head_];
  ++head_;
  if (--queued_ == 0) {  // steady state: the vector keeps its capacity
    queue_.clear();
    head_ = 0;
  }
  if (entry.buffer_id == kPoolEntry) {
    ReceivedDatagram out = std::move(fallback_datagram_);
    fallback_datagram_ = ReceivedDatagram{};
    if (out.truncated) ++truncated_;
    return out;
  }
  std::byte* buffer = detail::LoopAccess::receive_buffers(loop_)->buffer(entry.buffer_id);
  ReceivedDatagram out;
  const auto view = parse_datagram(buffer, entry.used, kDatagramNameBytes);
  if (!view) {  // cannot happen with a kernel that keeps its layout; never read past the data
    out.data = BufferLease::from_receive_buffer(loop_, entry.buffer_id, buffer, 0);
    return out;
  }
  out.data = BufferLease::from_receive_buffer(loop_, entry.buffer_id, view->payload.data(),
                                              static_cast<uint32_t>(view->payload.size()));
  if (view->source != nullptr) {
    std::memcpy(&out.source, view->source, view->source_length);
    out.source_length = view->source_length;
  }
  out.truncated = view->truncated;
  if (out.truncated) ++truncated_;
  return out;
}

}  // namespace ucp::detail
