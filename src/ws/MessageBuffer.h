#pragma once
// MessageBuffer: the bytes of one message that could not be handed over where they were
// received (a message split across reads or fragments, or an inflated one), and of one
// compressed outgoing message. Blocks up to MemoryPool::kMaxBlockSize come from the thread's
// pool, larger ones from the heap; capacity doubles as the message grows, and release()
// gives it all back, so a connection between messages holds none.
//
// Allocation failures are values (false), never exceptions: a peer must not be able to make
// the I/O path throw.

#include <cstddef>
#include <cstdint>
#include <span>

namespace ucp::ws::detail {

class MessageBuffer {
 public:
  MessageBuffer() noexcept = default;
  MessageBuffer(const MessageBuffer&) = delete;
  MessageBuffer& operator=(const MessageBuffer&) = delete;
  ~MessageBuffer() { release(); }

  std::span<std::byte> bytes() noexcept { return {data_, size_}; }
  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }

  /// Room for at least `more` bytes behind the data; false if memory is exhausted.
  bool reserve_more(size_t more) noexcept;
  /// The room behind the data (after reserve_more); commit() what was written there.
  std::span<std::byte> spare() noexcept { return {data_ + size_, capacity_ - size_}; }
  void commit(size_t n) noexcept { size_ += n; }
  bool append(std::span<const std::byte> bytes) noexcept;
  /// Drops the last `n` bytes.
  void drop_back(size_t n) noexcept { size_ -= n < size_ ? n : size_; }
  /// Empty, capacity kept.
  void clear() noexcept { size_ = 0; }
  /// Empty, memory given back.
  void release() noexcept;

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace ucp::ws::detail
