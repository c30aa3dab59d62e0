#pragma once
// BufferLease: received bytes lent to the handler without a copy. It may hold a buffer of
// the loop's provided ring (multishot receive), a registered fixed buffer, or a pool block
// (single-shot receive without a free fixed buffer); dropping the lease gives the buffer
// back where it came from. Move-only.
//
//   auto data = co_await conn.receive();        // Result<BufferLease>; empty() = EOF
//   co_await conn.write_all(data->bytes());    // sent straight from the lent buffer
//
// Drop leases promptly: a provided ring buffer held by the application cannot receive for
// any connection of the loop. Thread contract: the loop's thread; must not outlive it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace ucp {
class EventLoop;
}

namespace ucp::io {

class FixedBuffers;

class BufferLease {
 public:
  enum class Source : uint8_t { kNone, kProvidedRing, kFixed, kPool };

  BufferLease() noexcept = default;
  BufferLease(BufferLease&& other) noexcept { *this = std::move(other); }
  BufferLease& operator=(BufferLease&& other) noexcept;
  BufferLease(const BufferLease&) = delete;
  BufferLease& operator=(const BufferLease&) = delete;
  ~BufferLease() { reset(); }

  static BufferLease from_ring(EventLoop& loop, uint16_t id, std::byte* data,
                               uint32_t size) noexcept;
  static BufferLease from_fixed(FixedBuffers& buffers, uint16_t index) noexcept;
  /// A MemoryPool block of at least `capacity` bytes; empty lease if the pool cannot give one.
  static BufferLease from_pool(size_t capacity);

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const char* chars() const noexcept { return reinterpret_cast<const char*>(data_); }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  Source source() const noexcept { return source_; }

  /// For the receive path: the whole buffer to read into, then the bytes it received.
  std::span<std::byte> writable() noexcept { return {data_, capacity_}; }
  void set_size(size_t size) noexcept { size_ = static_cast<uint32_t>(size); }
  /// Drops the first `n` bytes (a handler that consumed part of the data).
  void consume(size_t n) noexcept {
    n = n < size_ ? n : size_;
    data_ += n;
    size_ -= static_cast<uint32_t>(n);
    capacity_ -= static_cast<uint32_t>(n);
  }
  /// Gives the buffer back now.
  void reset() noexcept;

 private:
  void* owner_ = nullptr;  // EventLoop*, FixedBuffers* or the pool block
  std::byte* data_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
  uint16_t id_ = 0;
  Source source_ = Source::kNone;
};

}  // namespace ucp::io
