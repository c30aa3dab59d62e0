#include "BufferRing.h"

#include <bit>
#include <cerrno>

#include <sys/mman.h>

#include "IoUring.h"

namespace ucp::io {

Result<std::unique_ptr<BufferRing>> BufferRing::create(io_uring& ring, uint32_t count,
                                                       uint32_t buffer_size, uint16_t group_id) {
  std::unique_ptr<BufferRing> self(new BufferRing);
  self->ring_ = &ring;
  self->count_ = std::bit_ceil(std::max<uint32_t>(count, 1));
  self->buffer_size_ = buffer_size;
  self->group_id_ = group_id;
  // The buffers first: they are what can fail for want of memory. Anonymous pages are
  // zero-filled on first touch, so nothing is committed here (no MAP_NORESERVE: a mapping the
  // overcommit policy refuses should fail now, not in the kernel's receive later).
  self->storage_bytes_ = size_t{self->count_} * buffer_size;
  void* storage = ::mmap(nullptr, self->storage_bytes_, PROT_READ | PROT_WRITE,
                         MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (storage == MAP_FAILED) return Unexpected{make_error_code(SetupError::kProvidedBuffers)};
  self->storage_ = static_cast<std::byte*>(storage);

  self->mapped_bytes_ = self->count_ * sizeof(io_uring_buf);
  void* mapped = ::mmap(nullptr, self->mapped_bytes_, PROT_READ | PROT_WRITE,
                        MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mapped == MAP_FAILED) return Unexpected{make_error_code(SetupError::kProvidedBuffers)};
  self->buf_ring_ = static_cast<io_uring_buf_ring*>(mapped);

  io_uring_buf_reg registration{};
  registration.ring_addr = reinterpret_cast<uint64_t>(mapped);
  registration.ring_entries = self->count_;
  registration.bgid = group_id;
  if (int ret = io_uring_register_buf_ring(&ring, &registration, 0); ret < 0) {
    ::munmap(mapped, self->mapped_bytes_);
    self->buf_ring_ = nullptr;
    return Unexpected{error_from_errno(-ret)};
  }
  io_uring_buf_ring_init(self->buf_ring_);
  int mask = io_uring_buf_ring_mask(self->count_);
  for (uint32_t id = 0; id < self->count_; ++id) {
    io_uring_buf_ring_add(self->buf_ring_, self->buffer(static_cast<uint16_t>(id)), buffer_size,
                          static_cast<uint16_t>(id), mask, static_cast<int>(id));
  }
  io_uring_buf_ring_advance(self->buf_ring_, static_cast<int>(self->count_));
  return self;
}

BufferRing::~BufferRing() {
  if (buf_ring_ != nullptr) {
    io_uring_unregister_buf_ring(ring_, group_id_);
    ::munmap(buf_ring_, mapped_bytes_);
  }
  if (storage_ != nullptr) ::munmap(storage_, storage_bytes_);
}

void BufferRing::recycle(uint16_t id) noexcept {
  io_uring_buf_ring_add(buf_ring_, buffer(id), buffer_size_, id, io_uring_buf_ring_mask(count_), 0);
  io_uring_buf_ring_advance(buf_ring_, 1);
  --held_;
}

}  // namespace ucp::io
