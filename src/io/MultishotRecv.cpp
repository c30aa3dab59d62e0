#include "ucp/io/detail/MultishotRecv.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <new>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/memory/MemoryPool.h"

#include "ReceiveBuffers.h"

namespace ucp::detail {

namespace {
// The pool fallback reads into a block of the 4 KiB class (pool header included).
constexpr size_t kFallbackBytes = 4096 - MemoryPool::kHeaderBytes;
}  // namespace

MultishotRecv::MultishotRecv(EventLoop& loop, int socket_fd, OnIdle on_idle) noexcept
    : loop_(loop), on_idle_(on_idle) {
  receive().code = OpCode::kRecvMultishot;
  receive().fd = socket_fd;
  receive().on_complete = &on_receive;
}

MultishotRecv::~MultishotRecv() {
  assert(!busy());
  // Buffers still queued go back to the pool: none may leak, whatever ended the stream.
  for (size_t i = head_; i < queue_.size(); ++i) recycle(queue_[i]);
}

std::byte* MultishotRecv::chunk_bytes(const Chunk& chunk) noexcept {
  if (chunk.buffer_id == kPoolChunk) return fallback_->buffer.writable().data() + chunk.offset;
  return detail::LoopAccess::receive_buffers(loop_)->buffer(chunk.buffer_id) + chunk.offset;
}

void MultishotRecv::recycle(const Chunk& chunk) noexcept {
  if (chunk.buffer_id == kPoolChunk) {
    fallback_->buffer.reset();
  } else {
    detail::LoopAccess::receive_buffers(loop_)->recycle(chunk.buffer_id);
  }
}

void MultishotRecv::pop_front() noexcept {
  ++head_;
  if (--queued_ == 0) {  // steady state: the vector keeps its capacity, nothing is allocated
    queue_.clear();
    head_ = 0;
  }
}

bool MultishotRecv::wait(std::coroutine_handle<> reader) noexcept {
  if (has_news()) return false;
  waiter_ = reader;
  if (state_ == State::kIdle && !start()) {
    waiter_ = {};
    return false;  // error_ says why
  }
  // kArmed: data will come. kPausing: the pause's last completion resumes the receive.
  // kFallback: its completion brings the news.
  return true;
}

bool MultishotRecv::start() noexcept {
  if (stopped_) {
    error_ = -ECANCELED;
    return false;
  }
  if (pool_dry_) {
    pool_dry_ = false;
    if (!fallback_ && !make_fallback()) return false;
    if (fallback_->buffer.source() == BufferLease::Source::kNone) {
      fallback_->buffer = BufferLease::from_pool(kFallbackBytes);
    }
    auto room = fallback_->buffer.writable();
    fallback_->op.data = room.data();
    fallback_->op.size = static_cast<uint32_t>(room.size());
    if (!detail::LoopAccess::submit(loop_, fallback_->op)) {
      error_ = fallback_->op.result;
      fallback_->buffer.reset();
      return false;
    }
    state_ = State::kFallback;
    return true;
  }
  if (!detail::LoopAccess::submit(loop_, receive())) {
    error_ = receive().result;
    return false;
  }
  state_ = State::kArmed;
  return true;
}

bool MultishotRecv::make_fallback() noexcept {
  try {
    fallback_ = make_pooled<Fallback>();
  } catch (const std::bad_alloc&) {
    error_ = -ENOMEM;
    return false;
  }
  fallback_->op.owner = this;
  fallback_->op.code = OpCode::kRecv;
  fallback_->op.fd = receive().fd;
  fallback_->op.on_complete = &on_fallback;
  return true;
}

void MultishotRecv::stop() noexcept {
  stopped_ = true;
  waiter_ = {};
  if (state_ == State::kArmed || state_ == State::kPausing)
    detail::LoopAccess::cancel(loop_, receive());
  if (state_ == State::kFallback) detail::LoopAccess::cancel(loop_, fallback_->op);
}

void MultishotRecv::became_idle() noexcept {
  state_ = State::kIdle;
  notify_idle();
}

std::coroutine_handle<> MultishotRecv::on_receive(IoContext& context, int32_t res,
                                                  uint32_t flags) noexcept {
  auto* self = static_cast<MultishotRecv*>(static_cast<Operation*>(&context));
  if (res > 0 && (flags & kCompletionBuffer)) {
    detail::LoopAccess::receive_buffers(self->loop_)->note_taken();
    self->queue_.push_back({buffer_id_of(flags), static_cast<uint32_t>(res), 0});
    ++self->queued_;
    if (self->queued_ >= kMaxQueued && self->state_ == State::kArmed) {
      self->state_ = State::kPausing;  // back-pressure: resumed when the reader waits again
      ++self->pauses_;
      detail::LoopAccess::cancel(self->loop_, self->receive());
    }
  } else if (res == 0) {
    self->eof_ = true;
  } else if (res == -ENOBUFS) {
    self->pool_dry_ = true;  // the loop's buffers ran out; not an error of this connection
  } else if (res == -ECANCELED && (self->state_ == State::kPausing || self->stopped_)) {
    // Our own pause or stop: not news for the reader.
  } else if (res < 0) {
    self->error_ = res;
  }
  if (!(flags & kCompletionMore)) {
    self->state_ = State::kIdle;
    // Ended with nothing to report (a pause whose cancel completed after the reader had
    // drained the queue and begun to wait again; a dry pool; the kernel stopping the receive
    // for its own reasons): the reader must never see that. Receive again, keep it waiting.
    if (self->waiter_ && !self->has_news() && self->start()) return {};
    self->became_idle();
  }
  if (!self->has_news()) return {};
  return std::exchange(self->waiter_, {});
}

std::coroutine_handle<> MultishotRecv::on_fallback(IoContext& context, int32_t res,
                                                   uint32_t) noexcept {
  auto* self = static_cast<Receive&>(context).owner;
  if (res > 0) {
    self->queue_.push_back({kPoolChunk, static_cast<uint32_t>(res), 0});
    ++self->queued_;
  } else {
    self->fallback_->buffer.reset();
    if (res == 0) {
      self->eof_ = true;
    } else {
      self->error_ = res;
    }
  }
  self->became_idle();
  if (!self->has_news()) return {};
  return std::exchange(self->waiter_, {});
}

BufferLease MultishotRecv::lend_front() noexcept {
  Chunk& chunk = queue_[head_];
  BufferLease lease;
  if (chunk.buffer_id == kPoolChunk) {
    lease = std::move(fallback_->buffer);
    lease.set_size(chunk.length);
    lease.consume(chunk.offset);
  } else {
    lease = BufferLease::from_receive_buffer(loop_, chunk.buffer_id, chunk_bytes(chunk),
                                             chunk.length - chunk.offset);
  }
  pop_front();
  return lease;
}

size_t MultishotRecv::copy_out(std::span<std::byte> destination) noexcept {
  size_t copied = 0;
  while (queued_ > 0 && copied < destination.size()) {
    Chunk& chunk = queue_[head_];
    const size_t n = std::min<size_t>(chunk.length - chunk.offset, destination.size() - copied);
    std::memcpy(destination.data() + copied, chunk_bytes(chunk), n);
    copied += n;
    chunk.offset += static_cast<uint32_t>(n);
    if (chunk.offset == chunk.length) {
      recycle(chunk);
      pop_front();
    }
  }
  return copied;
}

}  // namespace ucp::detail
