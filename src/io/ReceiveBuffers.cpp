#include "ReceiveBuffers.h"

#include <cerrno>

#include <sys/mman.h>

namespace ucp::io {

ReceiveBuffers::~ReceiveBuffers() {
  if (storage_ != nullptr) ::munmap(storage_, mapped_bytes_);
}

Result<void> ReceiveBuffers::map_storage(uint32_t count, uint32_t buffer_size) {
  const size_t bytes = size_t{count} * buffer_size;
  // MAP_NORESERVE: a worker with a large pool and little traffic commits only what it uses.
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return Unexpected{error_from_errno(errno)};
  storage_ = static_cast<std::byte*>(mapped);
  mapped_bytes_ = bytes;
  count_ = count;
  buffer_size_ = buffer_size;
  return {};
}

void ReceiveBuffers::provide_initial() noexcept {
  provided_ = count_ < kInitialProvision ? count_ : kInitialProvision;
  provide(0, provided_);
}

void ReceiveBuffers::provide_more() noexcept {
  // Double the working set (bounded by the pool), so growth takes few steps.
  const uint32_t n = provided_ < count_ - provided_ ? provided_ : count_ - provided_;
  provide(provided_, n);
  provided_ += n;
}

}  // namespace ucp::io
