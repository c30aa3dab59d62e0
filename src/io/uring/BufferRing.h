#pragma once
// BufferRing: the io_uring backend's receive buffers, registered as a provided-buffer ring
// (IORING_REGISTER_PBUF_RING): a multishot receive takes a buffer when data arrives and the
// CQE names it, so idle connections hold no receive buffer. Debian 12's liburing 2.3 lacks
// io_uring_setup_buf_ring, so the ring is mapped and registered here. Pinned; unregistered
// and unmapped in reverse order on destruction.
//
// Thread contract: the owning loop's thread only.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <liburing.h>

#include "ucp/base/Result.h"

#include "../ReceiveBuffers.h"

namespace ucp::detail {

class BufferRing final : public ReceiveBuffers {
 public:
  /// `count` is rounded up to a power of two (the kernel requires it).
  static Result<std::unique_ptr<BufferRing>> create(io_uring& ring, uint32_t count,
                                                    uint32_t buffer_size, uint16_t group_id);
  ~BufferRing() override;

  uint16_t group_id() const noexcept { return group_id_; }

 private:
  BufferRing() = default;
  void provide(uint32_t first, uint32_t n) noexcept override;
  void give_back(uint16_t id) noexcept override;

  io_uring* ring_ = nullptr;
  io_uring_buf_ring* buf_ring_ = nullptr;
  size_t mapped_bytes_ = 0;
  uint16_t group_id_ = 0;
};

}  // namespace ucp::detail
