#include "ReceiveBuffers.h"

#include <cerrno>
#include <string>

#include <sys/mman.h>

#include "SetupError.h"

namespace ucp::detail {

ReceiveBuffers::~ReceiveBuffers() {
  if (storage_ != nullptr) ::munmap(storage_, mapped_bytes_);
}

Result<void> ReceiveBuffers::map_storage(uint32_t count, uint32_t buffer_size) {
  const size_t bytes = size_t{count} * buffer_size;
  // Anonymous pages are zero-filled on first touch: nothing is committed here. No
  // MAP_NORESERVE: a mapping the overcommit policy refuses should fail now, at start-up with a
  // clear line, not later inside a receive.
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return Unexpected{make_error_code(SetupError::kReceiveBuffers)};
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

const std::error_category& setup_error_category() noexcept {
  struct Category : std::error_category {
    const char* name() const noexcept override { return "ucp.io.setup"; }
    std::string message(int value) const override {
      switch (static_cast<SetupError>(value)) {
        case SetupError::kReceiveBuffers:
          return "cannot map memory for the receive buffers";
      }
      return "unknown set-up error";
    }
  };
  static const Category category;
  return category;
}

}  // namespace ucp::detail
