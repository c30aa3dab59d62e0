#include "ucp/io/BufferLease.h"

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/memory/MemoryPool.h"

#include "Backend.h"
#include "ReceiveBuffers.h"

namespace ucp {

BufferLease BufferLease::from_receive_buffer(EventLoop& loop, uint16_t id, std::byte* data,
                                             uint32_t size) noexcept {
  return from_receive_buffer(*detail::LoopAccess::receive_buffers(loop), id, data, size);
}

BufferLease BufferLease::from_registered(EventLoop& loop, uint16_t index, std::byte* data,
                                         uint32_t capacity) noexcept {
  BufferLease lease;
  lease.owner_ = &loop;
  lease.data_ = data;
  lease.capacity_ = capacity;
  lease.id_ = index;
  lease.source_ = Source::kRegistered;
  return lease;
}

BufferLease BufferLease::from_pool(size_t capacity) {
  BufferLease lease;
  void* block = MemoryPool::allocate(capacity);
  lease.owner_ = block;
  lease.data_ = static_cast<std::byte*>(block);
  lease.capacity_ = static_cast<uint32_t>(capacity);
  lease.source_ = Source::kPool;
  return lease;
}

void BufferLease::reset() noexcept {
  switch (source_) {
    case Source::kNone:
      break;
    case Source::kReceiveBuffer:
      static_cast<detail::ReceiveBuffers*>(owner_)->recycle(id_);
      break;
    case Source::kRegistered:
      detail::LoopAccess::backend(*static_cast<EventLoop*>(owner_)).release_registered_buffer(id_);
      break;
    case Source::kPool:
      MemoryPool::deallocate(owner_);
      break;
  }
  owner_ = nullptr;
  data_ = nullptr;
  size_ = capacity_ = 0;
  source_ = Source::kNone;
}

}  // namespace ucp
