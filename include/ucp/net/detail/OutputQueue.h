#pragma once
// OutputQueue: a connection's bytes on their way to the kernel, in the order they were
// written. Two kinds of segment share one FIFO list:
//
//   head                                                                         tail
//    [chunk: copies of write()s] -> [span borrowed from a writer] -> [chunk] -> null
//
// - A chunk is one MemoryPool block (256 B .. 8 KiB size class) holding copied bytes:
//
//     | Chunk header | sent | unsent (data, size) | room |
//
//   A copy fills the tail chunk's room first and each new chunk doubles the last one's
//   size up to 8 KiB, so a burst of small writes lands in a few chunks that gather() hands
//   to one send. A chunk is freed as soon as its last byte is sent.
// - A borrowed segment names bytes in a suspended writer's memory (write_all(), or a
//   write() that found the queue full). Its node lives in the writer's awaiter: no copy, no
//   allocation. `adopt_waiting` copies what is left of the adoptable ones into chunks so
//   their writers can go on before the kernel has taken everything.
//
// The owner keeps at most one send in flight, built from gather(), and reports its result
// to consume(). Appending while a send is in flight is safe (only room past the sent range
// is written); adopt_waiting() and clear() are not, because they hand borrowed memory back
// to its writers and free chunks a send may still be reading.
//
// Thread contract: one thread (the connection's loop).

#include <cstddef>
#include <cstdint>
#include <span>

#include <sys/uio.h>

namespace ucp::detail {

enum class SegmentKind : uint8_t {
  kChunk,      // a pool block of the queue's own, holding copied bytes
  kBorrowed,   // a writer's span, until every byte of it is sent (write_all)
  kAdoptable,  // a writer's span that may instead be copied once there is room (write)
};

struct OutputSegment {
  OutputSegment* next = nullptr;
  const std::byte* data = nullptr;  // first unsent byte
  size_t size = 0;                  // unsent bytes
  SegmentKind kind = SegmentKind::kBorrowed;
  bool partly_sent = false;  // consume() took some of its bytes, not all
};

class OutputQueue {
 public:
  static constexpr size_t kMinChunkBlock = 256;   // pool size classes, header included
  static constexpr size_t kMaxChunkBlock = 8192;  // MemoryPool's largest class

  OutputQueue() = default;
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;
  /// Frees the chunks. Borrowed segments must be gone (clear()): their writers may be too.
  ~OutputQueue();

  bool empty() const noexcept { return head_ == nullptr; }
  /// The oldest segment, or null (segments chain through `next`).
  OutputSegment* first() const noexcept { return head_; }
  /// Unsent bytes, copied or borrowed.
  size_t size() const noexcept { return size_; }
  /// Unsent bytes held in chunks: the memory this queue owns, apart from chunk slack.
  size_t copied_bytes() const noexcept { return copied_; }

  /// Copies `data` behind everything queued (std::bad_alloc if the heap is exhausted).
  void append_copy(std::span<const std::byte> data);
  /// Queues a writer's span without copying; `segment` (data, size and kind set, size > 0)
  /// stays linked until consume(), adopt_waiting() or clear() returns it.
  void append_borrowed(OutputSegment& segment) noexcept;

  /// Fills `buffers` with the first unsent bytes, one per segment; returns how many, and
  /// names the last segment gathered in `last` (when given).
  size_t gather(std::span<iovec> buffers, const OutputSegment** last = nullptr) const noexcept;
  /// Unlinks borrowed `segment` if none of its bytes has been sent and it comes after
  /// `in_flight_last` (the last segment a send in flight covers; null: none). False otherwise.
  bool remove(OutputSegment& segment, const OutputSegment* in_flight_last) noexcept;
  /// Drops `bytes` sent bytes from the front and frees emptied chunks. Returns the
  /// borrowed segments now fully sent, chained through `next`, oldest first.
  OutputSegment* consume(size_t bytes) noexcept;
  /// Copies every adoptable segment's unsent bytes into chunks in its place (order is
  /// kept). Returns those segments, chained through `next`; their writers may go on.
  OutputSegment* adopt_waiting();
  /// Drops everything: frees the chunks and returns the borrowed segments, chained.
  OutputSegment* clear() noexcept;

 private:
  struct Chunk;
  OutputSegment* copy_after(OutputSegment* previous, std::span<const std::byte> data);
  static Chunk* new_chunk(size_t wanted_bytes, size_t previous_block);
  static void free_chunk(OutputSegment* segment) noexcept;

  OutputSegment* head_ = nullptr;
  OutputSegment* tail_ = nullptr;
  size_t size_ = 0;
  size_t copied_ = 0;
};

}  // namespace ucp::detail
