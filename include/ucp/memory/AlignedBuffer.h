#pragma once
// AlignedBuffer: a heap buffer whose address and size are multiples of an alignment, as
// O_DIRECT file I/O requires (File::direct_alignment() says which; 4096 fits every device).
// Move-only; the memory is freed with the buffer.
//
//   auto buffer = ucp::AlignedBuffer::allocate(64 * 1024, file.direct_alignment());
//   auto n = co_await file.read(buffer->bytes(), 0);
//
// Thread contract: none of its own (plain memory).

#include <cstddef>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>

#include "ucp/base/Result.h"

namespace ucp {

class AlignedBuffer {
 public:
  AlignedBuffer() noexcept = default;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  /// `size` bytes (rounded up to a multiple of `alignment`) at an address that is a multiple of
  /// `alignment`, a power of two. invalid_argument for another alignment; not_enough_memory when
  /// the heap refuses.
  static Result<AlignedBuffer> allocate(size_t size, size_t alignment = 4096) noexcept {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment < sizeof(void*)) {
      return Unexpected{std::errc::invalid_argument};
    }
    const size_t rounded = (size + alignment - 1) / alignment * alignment;
    void* memory = nullptr;
    if (::posix_memalign(&memory, alignment, rounded == 0 ? alignment : rounded) != 0) {
      return Unexpected{std::errc::not_enough_memory};
    }
    AlignedBuffer buffer;
    buffer.data_ = static_cast<std::byte*>(memory);
    buffer.size_ = rounded;
    return buffer;
  }

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  std::span<std::byte> bytes() noexcept { return {data_, size_}; }
  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ucp
