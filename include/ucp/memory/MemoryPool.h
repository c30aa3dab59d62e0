#pragma once
// MemoryPool: per-thread pools of fixed-size blocks for small, frequent objects
// (coroutine frames through promise_type::operator new, IoContexts).
//
// Each thread owns one pool with size classes 64, 96, 128, 192, ..., 6144, 8192 bytes (powers
// of two and the 3/4 step between them; header included, so payloads up to kMaxBlockSize =
// 8176 bytes, e.g. a frame holding a 4 KiB buffer); larger requests go to the heap. A block carries
// a 16-byte header naming its owner pool and class:
//
//   | owner Pool* (8) | class (4) | pad (4) | user bytes ... |
//
// A block freed on its owner thread goes back on that thread's free list (no atomics).
// A block freed on another thread is pushed onto the owner's lock-free "remote" stack and
// reused by the owner later. At thread exit the pool returns its chunks to the heap as
// soon as no block of it is alive (the last remote free does it if blocks outlive the thread).
//
// Thread contract: allocate/deallocate from any thread; a block may be freed anywhere.

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace ucp {

class MemoryPool {
 public:
  static constexpr size_t kHeaderBytes = 16;                    // before every block's user memory
  static constexpr size_t kMaxBlockSize = 8192 - kHeaderBytes;  // largest pooled payload

  static void* allocate(size_t size);
  static void deallocate(void* pointer) noexcept;

  /// Live statistics of the calling thread's pool (for tests and metrics; walks the free
  /// lists, so not for a hot path).
  struct Stats {
    size_t chunks = 0;          // 64 KiB chunks held
    long long outstanding = 0;  // blocks handed out by this thread not yet freed here
    size_t bytes_in_use = 0;    // the blocks of this pool not on its free lists, headers
                                // included (blocks freed by other threads count until the
                                // owner takes them back)
  };
  static Stats thread_stats() noexcept;
};

struct PoolDeleter {
  template <class T>
  void operator()(T* object) const noexcept {
    object->~T();
    MemoryPool::deallocate(object);
  }
};
template <class T>
using PoolPtr = std::unique_ptr<T, PoolDeleter>;

template <class T, class... Args>
PoolPtr<T> make_pooled(Args&&... args) {
  void* memory = MemoryPool::allocate(sizeof(T));
  try {
    return PoolPtr<T>(::new (memory) T(std::forward<Args>(args)...));
  } catch (...) {
    MemoryPool::deallocate(memory);
    throw;
  }
}

/// Base for types whose `new`/`delete` should use the pool (e.g. promise types).
struct PoolAllocated {
  static void* operator new(size_t size) { return MemoryPool::allocate(size); }
  static void operator delete(void* pointer) noexcept { MemoryPool::deallocate(pointer); }
};

}  // namespace ucp
