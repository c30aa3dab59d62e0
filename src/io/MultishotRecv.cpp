#include "ucp/io/detail/MultishotRecv.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <new>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/memory/MemoryPool.h"

#include "MultishotReceive.ipp"
#include "ReceiveBuffers.h"

namespace ucp::detail {

template class MultishotReceive<MultishotRecv, StreamChunk>;

namespace {
// The pool fallback reads into a block of the 4 KiB class (pool header included).
constexpr size_t kFallbackBytes = 4096 - MemoryPool::kHeaderBytes;
}  // namespace

MultishotRecv::MultishotRecv(EventLoop& loop, int socket, OnIdle on_idle) noexcept
    : MultishotReceive(loop, socket, OpCode::kRecvMultishot), on_idle_(on_idle) {}

MultishotRecv::~MultishotRecv() {
  assert(!busy());
  // Buffers still queued go back to the pool: none may leak, whatever ended the stream.
  for_each_queued([this](const StreamChunk& chunk) { recycle(chunk); });
}

MultishotRecv::Fallback::Fallback(MultishotRecv& owner) noexcept : stream(owner) {
  code = OpCode::kRecv;
  fd = owner.fd();
  on_complete = hook<&Fallback::done>;
}

std::coroutine_handle<> MultishotRecv::Fallback::done(int32_t res, uint32_t) noexcept {
  return stream.on_fallback(res);
}

std::byte* MultishotRecv::chunk_bytes(const StreamChunk& chunk) noexcept {
  if (chunk.buffer_id == kPoolChunk) return fallback_->buffer.writable().data() + chunk.offset;
  return buffers_->buffer(chunk.buffer_id) + chunk.offset;
}

void MultishotRecv::recycle(const StreamChunk& chunk) noexcept {
  if (chunk.buffer_id == kPoolChunk) {
    fallback_->buffer.reset();
  } else {
    buffers_->recycle(chunk.buffer_id);
  }
}

bool MultishotRecv::take(int32_t res, uint32_t completion) {
  if (res > 0 && (completion & kCompletionBuffer)) {
    push({buffer_id_of(completion), static_cast<uint32_t>(res), 0});
    return true;
  }
  if (res == 0) eof_ = true;
  return false;
}

bool MultishotRecv::start_fallback() noexcept {
  if (!fallback_) {
    try {
      fallback_ = make_pooled<Fallback>(*this);
    } catch (const std::bad_alloc&) {
      error_ = -ENOMEM;
      return false;
    }
  }
  if (fallback_->buffer.source() == BufferLease::Source::kNone) {
    fallback_->buffer = BufferLease::from_pool(kFallbackBytes);
  }
  auto room = fallback_->buffer.writable();
  fallback_->data = room.data();
  fallback_->size = static_cast<uint32_t>(room.size());
  if (!detail::LoopAccess::submit(loop_, *fallback_)) {
    error_ = fallback_->result;
    fallback_->buffer.reset();
    return false;
  }
  return true;
}

void MultishotRecv::stop() noexcept {
  waiter_ = {};
  stop_receiving();
}

std::coroutine_handle<> MultishotRecv::on_fallback(int32_t res) noexcept {
  if (res > 0) {
    push({kPoolChunk, static_cast<uint32_t>(res), 0});
    ++queued_;
  } else {
    fallback_->buffer.reset();
    if (res == 0) {
      eof_ = true;
    } else {
      error_ = res;
    }
  }
  return fallback_done();
}

BufferLease MultishotRecv::lend_front() noexcept {
  StreamChunk& chunk = front();
  BufferLease lease;
  if (chunk.buffer_id == kPoolChunk) {
    lease = std::move(fallback_->buffer);
    lease.set_size(chunk.length);
    lease.consume(chunk.offset);
  } else {
    lease = BufferLease::from_receive_buffer(*buffers_, chunk.buffer_id, chunk_bytes(chunk),
                                             chunk.length - chunk.offset);
  }
  pop_front();
  return lease;
}

size_t MultishotRecv::copy_out(std::span<std::byte> destination) noexcept {
  size_t copied = 0;
  while (queued_ > 0 && copied < destination.size()) {
    StreamChunk& chunk = front();
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
