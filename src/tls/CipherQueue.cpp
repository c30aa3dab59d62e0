#include "ucp/tls/detail/CipherQueue.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <utility>

namespace ucp::tls::detail {

struct CipherQueue::Block {
  Block* next;
  size_t used;
  std::byte data[kBlockBytes];
};

// Emptied blocks of one thread, for the next flush on it. Trivially destructible, so a queue
// destroyed late in the thread's exit (a static session) still finds it; `closed` then says
// to free blocks at once.
struct CipherQueue::BlockCache {
  std::array<Block*, kCachedBlocksPerThread> blocks;
  size_t count;
  bool closed;
};

CipherQueue::BlockCache& CipherQueue::thread_cache() noexcept {
  thread_local constinit BlockCache cache{};
  return cache;
}

CipherQueue::Block* CipherQueue::new_block() {
  auto& cache = thread_cache();
  Block* block =
      cache.count > 0 ? cache.blocks[--cache.count] : std::allocator<Block>().allocate(1);
  block->next = nullptr;
  block->used = 0;
  return block;
}

void CipherQueue::release_block(Block* block) noexcept {
  auto& cache = thread_cache();
  if (!cache.closed && cache.count < cache.blocks.size()) {
    // Registered with the first cached block: frees the cache when the thread ends.
    thread_local struct Closer {
      ~Closer() {
        auto& ending = thread_cache();
        for (size_t i = 0; i < ending.count; ++i) {
          std::allocator<Block>().deallocate(ending.blocks[i], 1);
        }
        ending.count = 0;
        ending.closed = true;
      }
    } closer;
    cache.blocks[cache.count++] = block;
  } else {
    std::allocator<Block>().deallocate(block, 1);
  }
}

CipherQueue::CipherQueue(CipherQueue&& other) noexcept
    : head_(std::exchange(other.head_, nullptr)),
      tail_(std::exchange(other.tail_, nullptr)),
      front_(std::exchange(other.front_, 0)),
      size_(std::exchange(other.size_, 0)) {}

CipherQueue& CipherQueue::operator=(CipherQueue&& other) noexcept {
  if (this != &other) {
    clear();
    head_ = std::exchange(other.head_, nullptr);
    tail_ = std::exchange(other.tail_, nullptr);
    front_ = std::exchange(other.front_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void CipherQueue::append(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    if (tail_ == nullptr || tail_->used == kBlockBytes) {
      Block* block = new_block();
      if (tail_ == nullptr) {
        head_ = block;
      } else {
        tail_->next = block;
      }
      tail_ = block;
    }
    const size_t n = std::min(bytes.size(), kBlockBytes - tail_->used);
    std::memcpy(tail_->data + tail_->used, bytes.data(), n);
    tail_->used += n;
    size_ += n;
    bytes = bytes.subspan(n);
  }
}

size_t CipherQueue::gather(std::span<iovec> buffers) const noexcept {
  size_t count = 0;
  size_t skip = front_;
  for (Block* block = head_; block != nullptr && count < buffers.size(); block = block->next) {
    if (block->used > skip) {
      buffers[count++] = {block->data + skip, block->used - skip};
    }
    skip = 0;
  }
  return count;
}

void CipherQueue::consume(size_t bytes) noexcept {
  bytes = std::min(bytes, size_);
  size_ -= bytes;
  while (head_ != nullptr) {
    const size_t unsent = head_->used - front_;
    if (bytes < unsent) {
      front_ += bytes;
      return;
    }
    bytes -= unsent;
    // Emptied: release it, the tail too (an idle session holds no block).
    Block* done = head_;
    head_ = head_->next;
    if (head_ == nullptr) tail_ = nullptr;
    front_ = 0;
    release_block(done);
    if (bytes == 0) return;
  }
}

void CipherQueue::clear() noexcept {
  while (head_ != nullptr) release_block(std::exchange(head_, head_->next));
  tail_ = nullptr;
  front_ = 0;
  size_ = 0;
}

}  // namespace ucp::tls::detail
