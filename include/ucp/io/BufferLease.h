#pragma once
// BufferLease: received bytes lent to the handler without a copy. It holds one of the loop's
// receive buffers (a multishot receive filled it), a registered buffer (a single-shot read on
// io_uring with registered buffers), or a pool block; dropping the lease gives the buffer back
// where it came from, whichever backend filled it. Move-only.
//
//   auto data = co_await conn.receive();        // Result<BufferLease>; empty() = EOF
//   co_await conn.write_all(data->bytes());    // sent straight from the lent buffer
//
// Drop leases promptly: a receive buffer held by the application cannot receive for any
// other connection of the loop. Thread contract: the loop's thread; must not outlive it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace ucp {
class EventLoop;
}
namespace ucp::detail {
class ReceiveBuffers;
}

namespace ucp {

class BufferLease {
 public:
  enum class Source : uint8_t { kNone, kReceiveBuffer, kRegistered, kPool };

  BufferLease() noexcept = default;
  BufferLease(BufferLease&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)),
        id_(other.id_),
        source_(std::exchange(other.source_, Source::kNone)) {}
  // Inline, and reset() only when there is something to give back: a receive path moves a
  // lease into an empty slot for every datagram.
  BufferLease& operator=(BufferLease&& other) noexcept {
    if (this != &other) {
      if (source_ != Source::kNone) reset();
      owner_ = std::exchange(other.owner_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      id_ = other.id_;
      source_ = std::exchange(other.source_, Source::kNone);
    }
    return *this;
  }
  BufferLease(const BufferLease&) = delete;
  BufferLease& operator=(const BufferLease&) = delete;
  ~BufferLease() {
    if (source_ != Source::kNone) reset();
  }

  /// Receive buffer `id` of `loop`, holding `size` bytes at `data`.
  static BufferLease from_receive_buffer(EventLoop& loop, uint16_t id, std::byte* data,
                                         uint32_t size) noexcept;
  /// The same from the loop's receive buffers themselves (detail::LoopAccess::receive_buffers):
  /// for a receive path that holds them, one lease per datagram without asking the loop.
  static BufferLease from_receive_buffer(detail::ReceiveBuffers& buffers, uint16_t id,
                                         std::byte* data, uint32_t size) noexcept {
    BufferLease lease;
    lease.owner_ = &buffers;
    lease.data_ = data;
    lease.size_ = size;
    lease.capacity_ = size;
    lease.id_ = id;
    lease.source_ = Source::kReceiveBuffer;
    return lease;
  }
  /// Registered buffer `index` of `loop`'s backend: `capacity` bytes at `data`, none received.
  static BufferLease from_registered(EventLoop& loop, uint16_t index, std::byte* data,
                                     uint32_t capacity) noexcept;
  /// A MemoryPool block of at least `capacity` bytes (std::bad_alloc if the heap is exhausted).
  static BufferLease from_pool(size_t capacity);

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const char* chars() const noexcept { return reinterpret_cast<const char*>(data_); }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  Source source() const noexcept { return source_; }
  /// The registered buffer's index (Source::kRegistered), else -1.
  int32_t registered_index() const noexcept {
    return source_ == Source::kRegistered ? int32_t{id_} : -1;
  }

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
  // detail::ReceiveBuffers* (a receive buffer), EventLoop* (a registered buffer) or the pool
  // block.
  void* owner_ = nullptr;
  std::byte* data_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
  uint16_t id_ = 0;
  Source source_ = Source::kNone;
};

}  // namespace ucp
