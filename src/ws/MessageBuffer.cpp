#include "MessageBuffer.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "ucp/memory/MemoryPool.h"

namespace ucp::ws::detail {

bool MessageBuffer::reserve_more(size_t more) noexcept {
  if (capacity_ - size_ >= more) return true;
  constexpr size_t kFirstBytes = 256;
  size_t capacity = std::max({kFirstBytes, capacity_ * 2, size_ + more});
  // Exactly a pool block when it fits one: the pool's classes are its only sizes.
  if (capacity > MemoryPool::kMaxBlockSize && size_ + more <= MemoryPool::kMaxBlockSize) {
    capacity = MemoryPool::kMaxBlockSize;
  }
  void* grown = nullptr;
  try {
    grown = MemoryPool::allocate(capacity);
  } catch (const std::bad_alloc&) {
    return false;
  }
  if (size_ > 0) std::memcpy(grown, data_, size_);
  if (data_ != nullptr) MemoryPool::deallocate(data_);
  data_ = static_cast<std::byte*>(grown);
  capacity_ = capacity;
  return true;
}

bool MessageBuffer::append(std::span<const std::byte> bytes) noexcept {
  if (bytes.empty()) return true;
  if (!reserve_more(bytes.size())) return false;
  std::memcpy(data_ + size_, bytes.data(), bytes.size());
  size_ += bytes.size();
  return true;
}

void MessageBuffer::release() noexcept {
  if (data_ != nullptr) MemoryPool::deallocate(data_);
  data_ = nullptr;
  size_ = capacity_ = 0;
}

}  // namespace ucp::ws::detail
