#include "BufferRing.h"

#include <bit>
#include <cerrno>

#include <sys/mman.h>

#include "../SetupError.h"
#include "IoUring.h"

namespace ucp::detail {

Result<std::unique_ptr<BufferRing>> BufferRing::create(io_uring& ring, uint32_t count,
                                                       uint32_t buffer_size, uint16_t group_id) {
  std::unique_ptr<BufferRing> self(new BufferRing);
  count = std::bit_ceil(std::max<uint32_t>(count, 1));
  if (auto mapped = self->map_storage(count, buffer_size); !mapped) {
    return Unexpected{mapped.error()};
  }
  self->ring_ = &ring;
  self->group_id_ = group_id;
  self->mapped_bytes_ = count * sizeof(io_uring_buf);
  void* mapped = ::mmap(nullptr, self->mapped_bytes_, PROT_READ | PROT_WRITE,
                        MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mapped == MAP_FAILED) return Unexpected{make_error_code(SetupError::kReceiveBuffers)};
  self->buf_ring_ = static_cast<io_uring_buf_ring*>(mapped);

  io_uring_buf_reg registration{};
  registration.ring_addr = reinterpret_cast<uint64_t>(mapped);
  registration.ring_entries = count;
  registration.bgid = group_id;
  if (int ret = io_uring_register_buf_ring(&ring, &registration, 0); ret < 0) {
    ::munmap(mapped, self->mapped_bytes_);
    self->buf_ring_ = nullptr;
    return Unexpected{error_from_errno(-ret)};
  }
  io_uring_buf_ring_init(self->buf_ring_);
  self->provide_initial();
  return self;
}

BufferRing::~BufferRing() {
  if (buf_ring_ == nullptr) return;
  io_uring_unregister_buf_ring(ring_, group_id_);
  ::munmap(buf_ring_, mapped_bytes_);
}

void BufferRing::provide(uint32_t first, uint32_t n) noexcept {
  const int mask = io_uring_buf_ring_mask(count());
  for (uint32_t i = 0; i < n; ++i) {
    const auto id = static_cast<uint16_t>(first + i);
    io_uring_buf_ring_add(buf_ring_, buffer(id), buffer_size(), id, mask, static_cast<int>(i));
  }
  io_uring_buf_ring_advance(buf_ring_, static_cast<int>(n));
}

void BufferRing::give_back(uint16_t id) noexcept {
  io_uring_buf_ring_add(buf_ring_, buffer(id), buffer_size(), id, io_uring_buf_ring_mask(count()),
                        0);
  io_uring_buf_ring_advance(buf_ring_, 1);
}

}  // namespace ucp::detail
