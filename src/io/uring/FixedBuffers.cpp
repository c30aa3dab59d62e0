#include "FixedBuffers.h"

#include <sys/mman.h>

namespace ucp::detail {

FixedBuffers::FixedBuffers(std::byte* storage, size_t mapped_bytes, uint32_t count,
                           uint32_t size) noexcept
    : storage_(storage), mapped_bytes_(mapped_bytes), count_(count), size_(size) {
  free_.reserve(count);
  for (uint32_t i = count; i > 0; --i) free_.push_back(static_cast<uint16_t>(i - 1));
}

FixedBuffers::~FixedBuffers() {
  // The ring is torn down after us; it drops its page references then (unpinning is the
  // kernel's), so unmapping here is safe even while the registration still exists.
  ::munmap(storage_, mapped_bytes_);
}

std::optional<uint16_t> FixedBuffers::acquire() noexcept {
  if (free_.empty()) return std::nullopt;
  uint16_t index = free_.back();
  free_.pop_back();
  return index;
}

void FixedBuffers::release(uint16_t index) noexcept { free_.push_back(index); }

}  // namespace ucp::detail
