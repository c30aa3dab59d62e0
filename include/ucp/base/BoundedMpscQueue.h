#pragma once
// BoundedMpscQueue<T>: a fixed-capacity lock-free multi-producer single-consumer FIFO
// (Dmitry Vyukov's bounded array queue, specialised for one consumer). All memory is
// allocated once in the constructor; a push or pop allocates nothing.
//
//   cells_: [seq|value][seq|value][seq|value] ... capacity (a power of two) cells
//            ^ dequeue_pos_ (consumer)          ^ enqueue_pos_ (producers, CAS)
//
// Each cell's `seq` says whose turn it is. For the cell at position p (index p & mask):
//   seq == p        free: the producer that claims position p may fill it
//   seq == p + 1    full: the consumer may read it
//   seq == p + cap  read: free again for the producer of the next lap (p + cap)
// A producer claims a position with one CAS on enqueue_pos_, fills the cell in place (the
// logger formats straight into it), then publishes it with one release store of `seq`.
// The consumer reads cells in position order, so per-producer order is preserved.
//
// Why our own: the logger needs a bounded queue (block or drop when full, never grow) whose
// slots are filled in place, so that a record costs no allocation and no extra copy; the
// node-based MpscQueue allocates per push and std containers need a lock.
//
// Progress: a producer preempted between claim and publish delays the consumer at that
// cell (try_pop reports "nothing ready") but never blocks other producers.

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace ucp {

/// Owned by one object (the logger's backend). `try_push*` may be called from any thread;
/// `try_pop*` only from the one consumer thread. `size_approx` from any thread.
template <class T>
class BoundedMpscQueue {
 public:
  /// `capacity` is rounded up to a power of two (at least 2).
  explicit BoundedMpscQueue(size_t capacity)
      : mask_(std::bit_ceil(capacity < 2 ? size_t{2} : capacity) - 1),
        cells_(std::make_unique<Cell[]>(mask_ + 1)) {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  BoundedMpscQueue(const BoundedMpscQueue&) = delete;
  BoundedMpscQueue& operator=(const BoundedMpscQueue&) = delete;

  size_t capacity() const noexcept { return mask_ + 1; }

  /// Any thread. Claims a cell, calls `fill(T&)` on it in place, then publishes it.
  /// Returns false (and does not call `fill`) when the queue is full. `fill` must not throw:
  /// a claimed cell must be published or the consumer would wait on it forever. If
  /// `position` is given it receives the cell's position: the record is consumed once
  /// `popped_count() > *position`.
  template <class Fill>
  bool try_push_with(Fill&& fill, size_t* position = nullptr) noexcept {
    size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      size_t seq = cell->seq.load(std::memory_order_acquire);
      auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // the consumer has not yet freed this cell from the previous lap
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);  // another producer took it
      }
    }
    fill(cell->value);
    cell->seq.store(pos + 1, std::memory_order_release);
    if (position != nullptr) *position = pos;
    return true;
  }

  /// Any thread. Returns false (value untouched) when full.
  bool try_push(T&& value) noexcept {
    return try_push_with([&](T& slot) { slot = std::move(value); });
  }
  bool try_push(const T& value) noexcept {
    return try_push_with([&](T& slot) { slot = value; });
  }

  /// Consumer thread only. If the oldest cell is published, calls `consume(T&)` on it in
  /// place, frees the cell and returns true; else returns false (empty, or its producer is
  /// still filling it).
  template <class Consume>
  bool try_pop_with(Consume&& consume) noexcept {
    size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    Cell& cell = cells_[pos & mask_];
    size_t seq = cell.seq.load(std::memory_order_acquire);
    if (seq != pos + 1) return false;
    consume(cell.value);
    dequeue_pos_.store(pos + 1, std::memory_order_relaxed);
    cell.seq.store(pos + mask_ + 1, std::memory_order_release);  // free for the next lap
    return true;
  }

  /// Consumer thread only.
  std::optional<T> try_pop() {
    std::optional<T> out;
    try_pop_with([&](T& slot) { out.emplace(std::move(slot)); });
    return out;
  }

  /// Consumer thread only: true if some producer has claimed a cell the consumer has not
  /// popped yet (it may still be being filled). The consumer drains until this is false.
  bool claimed_unread() const noexcept {
    return enqueue_pos_.load(std::memory_order_acquire) !=
           dequeue_pos_.load(std::memory_order_relaxed);
  }

  /// Any thread: claimed minus popped, a snapshot that may be stale.
  size_t size_approx() const noexcept {
    size_t popped = dequeue_pos_.load(std::memory_order_relaxed);
    size_t claimed = enqueue_pos_.load(std::memory_order_relaxed);
    return claimed >= popped ? claimed - popped : 0;
  }

  /// Any thread: the number of cells ever popped (the consumer's position).
  size_t popped_count() const noexcept { return dequeue_pos_.load(std::memory_order_acquire); }

 private:
  // One cache line per cell header so that neighbouring producers do not false-share.
  struct alignas(64) Cell {
    std::atomic<size_t> seq;
    T value{};
  };

  const size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<size_t> enqueue_pos_{0};  // producers
  alignas(64) std::atomic<size_t> dequeue_pos_{0};  // written by the consumer only
  char pad_[64 - sizeof(std::atomic<size_t>)];      // keeps later members off its line
};

}  // namespace ucp
