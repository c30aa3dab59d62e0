#pragma once
// ReceiveBuffers: a loop's pool of equal-size buffers that multishot receives fill (private to
// io/). The backend picks a free buffer when data arrives and names it in the completion
// (kCompletionBuffer + id), so an idle connection holds no receive buffer at all. Whoever holds
// a buffer's bytes (the receive queue, then a BufferLease) gives it back with recycle().
//
// io_uring registers the pool as a provided-buffer ring (uring/BufferRing) and the kernel picks;
// epoll keeps a free list and picks itself. The memory is mapped, not written, at start-up, and
// only a working set of buffers is handed to the backend at first (kInitialProvision); more are
// provided whenever fewer than a quarter of those provided are free (and, under a datagram
// handler, which holds none, whenever none was). A ring hands its free buffers out in FIFO
// order, so offering the whole pool at once would cycle through (and commit) every page of it;
// this way a loop commits about as many buffers as it has ever had in use at once, and a large
// pool costs address space, not RAM.
//
// Thread contract: the owning loop's thread only.

#include <cstddef>
#include <cstdint>

#include "ucp/base/Result.h"

namespace ucp::detail {

class ReceiveBuffers {
 public:
  ReceiveBuffers(const ReceiveBuffers&) = delete;
  ReceiveBuffers& operator=(const ReceiveBuffers&) = delete;
  virtual ~ReceiveBuffers();

  uint32_t count() const noexcept { return count_; }
  uint32_t buffer_size() const noexcept { return buffer_size_; }
  std::byte* buffer(uint16_t id) noexcept { return storage_ + size_t{id} * buffer_size_; }
  /// Buffers currently held outside the backend (received data not yet consumed).
  uint32_t held() const noexcept { return held_; }
  /// The backend handed a buffer out with a completion.
  void note_taken() noexcept {
    ++held_;
    if (provided_ < count_ && provided_ - held_ < provided_ / 4) provide_more();
  }
  /// Buffers handed to the backend so far (the rest of the pool is untouched).
  uint32_t provided() const noexcept { return provided_; }
  /// Gives buffer `id` back. Every buffer a completion hands out must come back through here,
  /// on every path (data consumed, connection closed, error).
  void recycle(uint16_t id) noexcept {
    --held_;
    give_back(id);
  }
  /// Gives back a buffer whose data was consumed in its completion, never held (not counted
  /// by note_taken()).
  void recycle_unheld(uint16_t id) noexcept { give_back(id); }
  /// The backend found none free: hands it more, while the pool has buffers it never had.
  void ran_dry() noexcept {
    if (provided_ < count_) provide_more();
  }

 protected:
  ReceiveBuffers() = default;
  static constexpr uint32_t kInitialProvision = 256;
  /// Maps count x buffer_size bytes (not yet committed). `count` must be a power of two.
  Result<void> map_storage(uint32_t count, uint32_t buffer_size);
  /// Hands the first buffers to the backend; call once the backend can take them.
  void provide_initial() noexcept;
  /// Makes buffers [first, first + n) available to the backend for the first time.
  virtual void provide(uint32_t first, uint32_t n) noexcept = 0;
  /// Makes buffer `id` available again.
  virtual void give_back(uint16_t id) noexcept = 0;

 private:
  std::byte* storage_ = nullptr;
  size_t mapped_bytes_ = 0;
  uint32_t count_ = 0;
  uint32_t buffer_size_ = 0;
  uint32_t held_ = 0;
  uint32_t provided_ = 0;

  void provide_more() noexcept;
};

}  // namespace ucp::detail
