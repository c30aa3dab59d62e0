#include "ucp/net/detail/OutputQueue.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <new>

#include "ucp/memory/MemoryPool.h"

namespace ucp::detail {

namespace {
constexpr size_t kPoolHeader = 16;  // MemoryPool's own header inside every block
}  // namespace

struct OutputQueue::Chunk : OutputSegment {
  size_t block_bytes = 0;  // the pool size class this chunk occupies
  size_t room = 0;         // free bytes after the unsent ones

  std::byte* storage() noexcept { return reinterpret_cast<std::byte*>(this + 1); }
  size_t capacity() const noexcept { return block_bytes - kPoolHeader - sizeof(Chunk); }
  std::byte* free_space() noexcept { return storage() + capacity() - room; }
};

OutputQueue::~OutputQueue() {
  // Only chunks may be left: a borrowed node belongs to a writer that may be gone.
  assert(size_ == copied_);
  for (OutputSegment* segment = head_; segment != nullptr;) {
    OutputSegment* next = segment->next;
    if (segment->kind == SegmentKind::kChunk) free_chunk(segment);
    segment = next;
  }
}

OutputQueue::Chunk* OutputQueue::new_chunk(size_t wanted_bytes, size_t previous_block) {
  size_t block = std::bit_ceil(wanted_bytes + kPoolHeader + sizeof(Chunk));
  block = std::clamp(std::max(block, previous_block * 2), kMinChunkBlock, kMaxChunkBlock);
  void* memory = MemoryPool::allocate(block - kPoolHeader);  // exactly the `block` class
  auto* chunk = ::new (memory) Chunk;
  chunk->kind = SegmentKind::kChunk;
  chunk->block_bytes = block;
  chunk->room = chunk->capacity();
  chunk->data = chunk->storage();
  return chunk;
}

void OutputQueue::free_chunk(OutputSegment* segment) noexcept {
  auto* chunk = static_cast<Chunk*>(segment);
  chunk->~Chunk();
  MemoryPool::deallocate(chunk);
}

// Copies `data` right after `previous` (at the head when null): into its room if it is a
// chunk, then into new chunks. Every step leaves the list whole, even if an allocation
// throws. Returns the segment holding the last byte (`previous` if all fit there).
OutputSegment* OutputQueue::copy_after(OutputSegment* previous, std::span<const std::byte> data) {
  OutputSegment* const after = previous ? previous->next : head_;
  OutputSegment* last = previous;
  size_t last_block = 0;
  if (previous != nullptr && previous->kind == SegmentKind::kChunk) {
    auto* chunk = static_cast<Chunk*>(previous);
    size_t n = std::min(chunk->room, data.size());
    if (n > 0) std::memcpy(chunk->free_space(), data.data(), n);
    chunk->size += n;
    chunk->room -= n;
    size_ += n;
    copied_ += n;
    data = data.subspan(n);
    last_block = chunk->block_bytes;
  }
  while (!data.empty()) {
    Chunk* chunk = new_chunk(data.size(), last_block);
    size_t n = std::min(chunk->room, data.size());
    std::memcpy(chunk->free_space(), data.data(), n);
    chunk->size = n;
    chunk->room -= n;
    chunk->next = after;
    if (last != nullptr) {
      last->next = chunk;
    } else {
      head_ = chunk;
    }
    if (after == nullptr) tail_ = chunk;
    size_ += n;
    copied_ += n;
    data = data.subspan(n);
    last = chunk;
    last_block = chunk->block_bytes;
  }
  return last;
}

void OutputQueue::append_copy(std::span<const std::byte> data) {
  if (!data.empty()) copy_after(tail_, data);
}

void OutputQueue::append_borrowed(OutputSegment& segment) noexcept {
  assert(segment.size > 0 && segment.kind != SegmentKind::kChunk);
  segment.next = nullptr;
  if (tail_ != nullptr) {
    tail_->next = &segment;
  } else {
    head_ = &segment;
  }
  tail_ = &segment;
  size_ += segment.size;
}

size_t OutputQueue::gather(std::span<iovec> buffers, const OutputSegment** last) const noexcept {
  size_t count = 0;
  for (OutputSegment* segment = head_; segment != nullptr && count < buffers.size();
       segment = segment->next) {
    buffers[count++] = iovec{const_cast<std::byte*>(segment->data), segment->size};
    if (last != nullptr) *last = segment;
  }
  return count;
}

bool OutputQueue::remove(OutputSegment& segment, const OutputSegment* in_flight_last) noexcept {
  assert(segment.kind != SegmentKind::kChunk);
  bool in_flight = in_flight_last != nullptr;
  OutputSegment* previous = nullptr;
  for (OutputSegment* node = head_; node != nullptr; previous = node, node = node->next) {
    if (node != &segment) {
      if (node == in_flight_last) in_flight = false;  // everything after it is not
      continue;
    }
    if (in_flight) return false;
    if (previous != nullptr) {
      previous->next = node->next;
    } else {
      head_ = node->next;
    }
    if (tail_ == node) tail_ = previous;
    size_ -= node->size;
    node->next = nullptr;
    return true;
  }
  return false;
}

OutputSegment* OutputQueue::consume(size_t bytes) noexcept {
  OutputSegment* done_head = nullptr;
  OutputSegment* done_tail = nullptr;
  while (bytes > 0 && head_ != nullptr) {
    OutputSegment* segment = head_;
    size_t n = std::min(bytes, segment->size);
    segment->data += n;
    segment->size -= n;
    size_ -= n;
    if (segment->kind == SegmentKind::kChunk) copied_ -= n;
    bytes -= n;
    if (segment->size > 0) {
      segment->partly_sent = true;
      break;
    }
    head_ = segment->next;
    if (head_ == nullptr) tail_ = nullptr;
    if (segment->kind == SegmentKind::kChunk) {
      free_chunk(segment);
      continue;
    }
    segment->next = nullptr;
    if (done_tail != nullptr) {
      done_tail->next = segment;
    } else {
      done_head = segment;
    }
    done_tail = segment;
  }
  assert(bytes == 0);  // the kernel cannot have sent more than we offered
  return done_head;
}

OutputSegment* OutputQueue::adopt_waiting() {
  OutputSegment* adopted_head = nullptr;
  OutputSegment* adopted_tail = nullptr;
  OutputSegment* previous = nullptr;
  for (OutputSegment* segment = head_; segment != nullptr;) {
    OutputSegment* next = segment->next;
    if (segment->kind != SegmentKind::kAdoptable) {
      previous = segment;
      segment = next;
      continue;
    }
    // Unlink the borrowed node, then put copies of its bytes where it was.
    if (previous != nullptr) {
      previous->next = next;
    } else {
      head_ = next;
    }
    if (tail_ == segment) tail_ = previous;
    size_ -= segment->size;
    OutputSegment* last = copy_after(previous, {segment->data, segment->size});
    previous = last;
    segment->next = nullptr;
    if (adopted_tail != nullptr) {
      adopted_tail->next = segment;
    } else {
      adopted_head = segment;
    }
    adopted_tail = segment;
    segment = next;
  }
  return adopted_head;
}

OutputSegment* OutputQueue::clear() noexcept {
  OutputSegment* borrowed_head = nullptr;
  OutputSegment* borrowed_tail = nullptr;
  for (OutputSegment* segment = head_; segment != nullptr;) {
    OutputSegment* next = segment->next;
    if (segment->kind == SegmentKind::kChunk) {
      free_chunk(segment);
    } else {
      segment->next = nullptr;
      if (borrowed_tail != nullptr) {
        borrowed_tail->next = segment;
      } else {
        borrowed_head = segment;
      }
      borrowed_tail = segment;
    }
    segment = next;
  }
  head_ = tail_ = nullptr;
  size_ = copied_ = 0;
  return borrowed_head;
}

}  // namespace ucp::detail
