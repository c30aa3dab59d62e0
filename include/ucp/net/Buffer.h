#pragma once
// Buffer: an application byte buffer (muduo's layout), bounded by a maximum size.
//
//   +-------------------+------------------+------------------+
//   | prependable bytes |  readable bytes  |  writable bytes  |
//   +-------------------+------------------+------------------+
//   0        <=     reader_      <=     writer_      <=     size
//
// The cheap prepend (kCheapPrepend bytes reserved up front) lets a protocol put a length
// header in front of a message already written. Growth first moves readable bytes to the
// front, then reallocates, and never beyond `max_size` (a hostile peer cannot grow it).
//
// Thread contract: one thread at a time.

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace ucp {

class Buffer {
 public:
  static constexpr size_t kCheapPrepend = 8;
  static constexpr size_t kInitialSize = 1024;

  explicit Buffer(size_t max_size = 64 * 1024 * 1024, size_t initial_size = kInitialSize);

  size_t readable_bytes() const noexcept { return writer_ - reader_; }
  size_t writable_bytes() const noexcept { return storage_.size() - writer_; }
  size_t prependable_bytes() const noexcept { return reader_; }
  size_t max_size() const noexcept { return max_size_; }

  std::span<const std::byte> readable() const noexcept {
    return {storage_.data() + reader_, readable_bytes()};
  }
  std::string_view view() const noexcept {
    return {reinterpret_cast<const char*>(storage_.data() + reader_), readable_bytes()};
  }
  std::span<std::byte> writable() noexcept { return {storage_.data() + writer_, writable_bytes()}; }

  /// Makes room for at least `bytes` more writable bytes; false if that would pass max_size.
  bool ensure_writable(size_t bytes);
  /// Marks `bytes` of writable() as written.
  void commit(size_t bytes) noexcept { writer_ += bytes; }
  /// Copies `data` in (growing as needed); false if max_size would be passed.
  bool append(std::span<const std::byte> data);
  bool append(std::string_view text) { return append(std::as_bytes(std::span(text))); }
  /// Puts `data` just before the readable bytes; false if there is no prependable room.
  bool prepend(std::span<const std::byte> data) noexcept;
  /// Drops `bytes` readable bytes from the front.
  void consume(size_t bytes) noexcept;
  void clear() noexcept { reader_ = writer_ = kCheapPrepend; }

 private:
  std::vector<std::byte> storage_;
  size_t reader_ = kCheapPrepend;
  size_t writer_ = kCheapPrepend;
  size_t max_size_;
};

}  // namespace ucp
