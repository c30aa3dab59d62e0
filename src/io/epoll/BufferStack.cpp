#include "BufferStack.h"

#include <algorithm>
#include <bit>

namespace ucp::detail {

Result<std::unique_ptr<BufferStack>> BufferStack::create(uint32_t count, uint32_t buffer_size) {
  std::unique_ptr<BufferStack> self(new BufferStack);
  count = std::bit_ceil(std::max<uint32_t>(count, 1));
  if (auto mapped = self->map_storage(count, buffer_size); !mapped) {
    return Unexpected{mapped.error()};
  }
  self->free_.reserve(count);
  self->provide_initial();
  return self;
}

void BufferStack::provide(uint32_t first, uint32_t n) noexcept {
  // Lowest id on top: a fresh loop starts with the first buffers of the mapping.
  for (uint32_t i = n; i > 0; --i) free_.push_back(static_cast<uint16_t>(first + i - 1));
}

}  // namespace ucp::detail
