#pragma once
// FixedBuffers: `count` buffers of `size` bytes registered once with a loop's ring
// (io_uring_register_buffers), so reads and writes that use them go through
// IORING_OP_READ_FIXED / WRITE_FIXED and the kernel skips pinning and mapping the user
// pages on every operation. An opt-in strategy of the io_uring backend
// (event_loop.registered_buffers_count): measured within noise on TCP, off by default.
//
// A single-shot receive borrows one (LoopAccess::borrow_receive_buffer) and gives it back when
// the handler drops the BufferLease; a send whose bytes lie inside a registered buffer goes
// out with WRITE_FIXED automatically (echoing a received lease costs no copy).
// When every buffer is borrowed, callers fall back to ordinary memory: nothing waits.
//
// The kernel still copies socket payloads between socket buffers and these pages, so on
// TCP the saving is only the per-operation page lookup; docs/benchmarks.md has the numbers.
//
// Thread contract: the owning loop's thread only.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ucp::detail {

class FixedBuffers {
 public:
  FixedBuffers(std::byte* storage, size_t mapped_bytes, uint32_t count, uint32_t size) noexcept;
  FixedBuffers(const FixedBuffers&) = delete;
  FixedBuffers& operator=(const FixedBuffers&) = delete;
  ~FixedBuffers();

  uint32_t count() const noexcept { return count_; }
  uint32_t buffer_size() const noexcept { return size_; }
  uint32_t in_use() const noexcept { return count_ - static_cast<uint32_t>(free_.size()); }

  /// A free buffer's index, or nothing when all are borrowed.
  std::optional<uint16_t> acquire() noexcept;
  void release(uint16_t index) noexcept;
  std::span<std::byte> buffer(uint16_t index) noexcept {
    return {storage_ + size_t{index} * size_, size_};
  }
  /// The index of the registered buffer holding all of [data, data + length), or -1.
  int index_of(const void* data, size_t length) const noexcept {
    auto* p = static_cast<const std::byte*>(data);
    if (p < storage_ || p >= storage_ + size_t{count_} * size_) return -1;
    size_t index = static_cast<size_t>(p - storage_) / size_;
    if (p + length > storage_ + (index + 1) * size_) return -1;
    return static_cast<int>(index);
  }

 private:
  std::byte* storage_;
  size_t mapped_bytes_;
  uint32_t count_;
  uint32_t size_;
  std::vector<uint16_t> free_;  // a stack: the most recently used buffer is still in cache
};

}  // namespace ucp::detail
