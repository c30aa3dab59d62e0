#include "ucp/net/Buffer.h"

#include <algorithm>
#include <cstring>

namespace ucp {

Buffer::Buffer(size_t max_size, size_t initial_size)
    : storage_(kCheapPrepend + std::min(initial_size, max_size)), max_size_(max_size) {}

bool Buffer::ensure_writable(size_t bytes) {
  if (writable_bytes() >= bytes) return true;
  size_t readable = readable_bytes();
  if (readable + bytes > max_size_) return false;
  if (prependable_bytes() - kCheapPrepend + writable_bytes() >= bytes) {
    // Enough room in total: slide the readable bytes to the front instead of growing.
    std::memmove(storage_.data() + kCheapPrepend, storage_.data() + reader_, readable);
  } else {
    size_t wanted = std::max(storage_.size() * 2, kCheapPrepend + readable + bytes);
    std::vector<std::byte> grown(std::min(wanted, kCheapPrepend + max_size_));
    std::memcpy(grown.data() + kCheapPrepend, storage_.data() + reader_, readable);
    storage_.swap(grown);
  }
  reader_ = kCheapPrepend;
  writer_ = reader_ + readable;
  return true;
}

bool Buffer::append(std::span<const std::byte> data) {
  if (!ensure_writable(data.size())) return false;
  if (!data.empty()) std::memcpy(storage_.data() + writer_, data.data(), data.size());
  writer_ += data.size();
  return true;
}

bool Buffer::prepend(std::span<const std::byte> data) noexcept {
  if (data.size() > prependable_bytes()) return false;
  reader_ -= data.size();
  std::memcpy(storage_.data() + reader_, data.data(), data.size());
  return true;
}

void Buffer::consume(size_t bytes) noexcept {
  if (bytes >= readable_bytes()) {
    clear();
  } else {
    reader_ += bytes;
  }
}

}  // namespace ucp
