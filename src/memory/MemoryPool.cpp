#include "ucp/memory/MemoryPool.h"

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

namespace ucp {
namespace {

constexpr size_t kHeaderSize = MemoryPool::kHeaderBytes;  // keeps user memory 16-aligned
constexpr size_t kMinClassShift = 6;                      // 64 bytes
// Classes grow by powers of two with a 3/4 step between (64, 96, 128, 192 ... 6144, 8192):
// a coroutine frame just past a power of two (a 520-byte frame) wastes a quarter, not half.
// Every class is a multiple of 16, so user memory stays aligned to alignof(max_align_t).
constexpr size_t kClassCount = 15;
constexpr size_t kChunkSize = 64 * 1024;
constexpr uint32_t kHeapClass = 0xffffffff;

struct FreeBlock {
  FreeBlock* next;
};

class Pool;

struct Header {
  Pool* owner;
  uint32_t size_class;
  uint32_t padding;
};
static_assert(sizeof(Header) == kHeaderSize);

size_t class_of(size_t total) noexcept {
  size_t rounded = std::bit_ceil(std::max<size_t>(total, size_t{1} << kMinClassShift));
  size_t index = 2 * (static_cast<size_t>(std::countr_zero(rounded)) - kMinClassShift);
  bool three_quarters_fit = index > 0 && total <= rounded / 4 * 3;
  return three_quarters_fit ? index - 1 : index;
}
size_t class_bytes(size_t size_class) noexcept {
  if (size_class % 2 == 0) return size_t{1} << (size_class / 2 + kMinClassShift);
  return size_t{3} << ((size_class - 1) / 2 + kMinClassShift - 1);  // 3/4 of the next power
}

class Pool {
 public:
  void* allocate(size_t size_class) {
    FreeBlock*& head = free_[size_class];
    if (head == nullptr) reclaim_remote();
    if (head == nullptr) refill(size_class);
    FreeBlock* block = head;
    head = block->next;
    ++outstanding_;
    auto* header = reinterpret_cast<Header*>(block);
    header->owner = this;
    header->size_class = static_cast<uint32_t>(size_class);
    return reinterpret_cast<std::byte*>(block) + kHeaderSize;
  }

  void free_local(Header* header) noexcept {
    auto* block = reinterpret_cast<FreeBlock*>(header);
    block->next = free_[header->size_class];
    free_[header->size_class] = block;
    --outstanding_;
  }

  // Any thread but the owner. The decrement is the last touch of the pool: whoever brings
  // the debt to zero after the owner exited frees the pool.
  void free_remote(Header* header) noexcept {
    auto* block = reinterpret_cast<FreeBlock*>(header);
    FreeBlock* old_head = remote_.load(std::memory_order_relaxed);
    do {
      block->next = old_head;
    } while (!remote_.compare_exchange_weak(old_head, block, std::memory_order_release,
                                            std::memory_order_relaxed));
    if (debt_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Owner thread exit. `debt_` holds minus the remote frees so far; adding the owner's
  // count of outstanding blocks leaves the number still alive anywhere.
  void retire() noexcept {
    if (debt_.fetch_add(outstanding_, std::memory_order_acq_rel) + outstanding_ == 0) delete this;
  }

  MemoryPool::Stats stats() const noexcept {
    MemoryPool::Stats stats{chunks_.size(), outstanding_, 0};
    for (size_t size_class = 0; size_class < kClassCount; ++size_class) {
      const size_t bytes = class_bytes(size_class);
      size_t free_blocks = 0;
      for (const FreeBlock* block = free_[size_class]; block != nullptr; block = block->next) {
        ++free_blocks;
      }
      stats.bytes_in_use +=
          (chunks_per_class_[size_class] * (kChunkSize / bytes) - free_blocks) * bytes;
    }
    return stats;
  }

  ~Pool() {
    for (void* chunk : chunks_) std::free(chunk);
  }

 private:
  void reclaim_remote() noexcept {
    FreeBlock* block = remote_.exchange(nullptr, std::memory_order_acquire);
    while (block != nullptr) {
      FreeBlock* next = block->next;
      auto* header = reinterpret_cast<Header*>(block);
      block->next = free_[header->size_class];
      free_[header->size_class] = block;
      block = next;
    }
  }

  void refill(size_t size_class) {
    void* chunk = std::aligned_alloc(64, kChunkSize);
    if (chunk == nullptr) throw std::bad_alloc();
    chunks_.push_back(chunk);
    ++chunks_per_class_[size_class];
    size_t bytes = class_bytes(size_class);
    auto* base = static_cast<std::byte*>(chunk);
    for (size_t offset = 0; offset + bytes <= kChunkSize; offset += bytes) {
      auto* block = reinterpret_cast<FreeBlock*>(base + offset);
      // Remember the class even while free, so remote blocks can be sorted on reclaim.
      reinterpret_cast<Header*>(block)->size_class = static_cast<uint32_t>(size_class);
      block->next = free_[size_class];
      free_[size_class] = block;
    }
  }

  std::array<FreeBlock*, kClassCount> free_{};
  std::vector<void*> chunks_;
  std::array<size_t, kClassCount> chunks_per_class_{};
  long long outstanding_ = 0;  // owner-thread count: allocations minus local frees
  alignas(64) std::atomic<FreeBlock*> remote_{nullptr};
  std::atomic<long long> debt_{0};
};

// FreeBlock::next overlaps Header::owner, not size_class.
static_assert(offsetof(Header, size_class) >= sizeof(FreeBlock*));

struct ThreadPool {
  Pool* pool = new Pool;
  // Later thread_local destructors may still free blocks: they take the remote path.
  ~ThreadPool() { std::exchange(pool, nullptr)->retire(); }
};
thread_local ThreadPool t_pool;

}  // namespace

void* MemoryPool::allocate(size_t size) {
  size_t total = size + kHeaderSize;
  if (total > class_bytes(kClassCount - 1) || t_pool.pool == nullptr) {
    auto* header = static_cast<Header*>(::operator new(total));
    header->owner = nullptr;
    header->size_class = kHeapClass;
    return reinterpret_cast<std::byte*>(header) + kHeaderSize;
  }
  return t_pool.pool->allocate(class_of(total));
}

void MemoryPool::deallocate(void* pointer) noexcept {
  if (pointer == nullptr) return;
  auto* header = reinterpret_cast<Header*>(static_cast<std::byte*>(pointer) - kHeaderSize);
  if (header->size_class == kHeapClass) {
    ::operator delete(header);
    return;
  }
  Pool* owner = header->owner;
  if (owner == t_pool.pool) {
    owner->free_local(header);
  } else {
    owner->free_remote(header);
  }
}

MemoryPool::Stats MemoryPool::thread_stats() noexcept { return t_pool.pool->stats(); }

}  // namespace ucp
