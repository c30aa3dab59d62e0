#pragma once
// BufferRing: a provided-buffer ring (IORING_REGISTER_PBUF_RING) that multishot receives
// pick buffers from, so idle connections hold no receive buffer (IO_URING_PITFALLS #5, #6).
// Debian 12's liburing 2.3 lacks io_uring_setup_buf_ring, so the ring is mmap'ed and
// registered here. Pinned; unregistered and unmapped in reverse order on destruction.
//
// The buffers themselves are one anonymous mapping: reserved at start, but a page costs
// memory only once the kernel first receives into it, so a worker with 4096 x 4 KiB buffers
// and little traffic does not hold 16 MiB. If the mapping cannot be had (address space or
// overcommit limit), create() fails with SetupError::kProvidedBuffers.
//
// Thread contract: the owning loop's thread only.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <liburing.h>

#include "ucp/base/Result.h"

namespace ucp::io {

class BufferRing {
 public:
  /// `count` is rounded up to a power of two (the kernel requires it). Fails with
  /// SetupError::kProvidedBuffers when the buffers' memory cannot be mapped, else with the
  /// kernel's error for the ring's registration.
  static Result<std::unique_ptr<BufferRing>> create(io_uring& ring, uint32_t count,
                                                    uint32_t buffer_size, uint16_t group_id);
  BufferRing(const BufferRing&) = delete;
  BufferRing& operator=(const BufferRing&) = delete;
  ~BufferRing();

  uint16_t group_id() const noexcept { return group_id_; }
  uint32_t buffer_size() const noexcept { return buffer_size_; }
  uint32_t count() const noexcept { return count_; }
  std::byte* buffer(uint16_t id) noexcept { return storage_ + size_t{id} * buffer_size_; }
  /// Gives buffer `id` back to the kernel. Every buffer a CQE hands out must come back
  /// through here, on every path (data consumed, connection closed, error).
  void recycle(uint16_t id) noexcept;
  /// Buffers currently held by the application (handed out, not yet recycled).
  uint32_t held() const noexcept { return held_; }
  void note_taken() noexcept { ++held_; }

 private:
  BufferRing() = default;

  io_uring* ring_ = nullptr;
  io_uring_buf_ring* buf_ring_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::byte* storage_ = nullptr;  // count_ x buffer_size_, mmap'ed
  size_t storage_bytes_ = 0;
  uint32_t count_ = 0;
  uint32_t buffer_size_ = 0;
  uint16_t group_id_ = 0;
  uint32_t held_ = 0;
};

}  // namespace ucp::io
