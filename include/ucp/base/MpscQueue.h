#pragma once
// MpscQueue<T>: an unbounded lock-free multi-producer single-consumer FIFO, the queue behind
// EventLoop::post. Producers on any thread `push`; one consumer thread `pop`s.
//
// Layout: a chain of 4 KiB blocks. A block is a header, one ready flag per slot, then the
// slots, each value on its own cache line when it is 64 bytes (a UniqueFunction<void()>).
//
//    head_, head_index_ (consumer)         tail_ = claimed slots << 48 | tail block address
//      v                                     v
//    [next|refs|flags|slot ... slot] -> [next|refs|flags|slot slot ...      ] -> null
//
// Push. One fetch_add on tail_ claims a slot. The word holds the tail block's address in its
// low 48 bits and the number of claims on that block in its high 16, so one atomic operation
// names both the block and the slot, and no producer ever walks the chain. The producer moves its
// value into the slot and sets the slot's flag (release). A claim past the last slot is "late":
// that producer links a next block (a spare the consumer handed back, or a new one; the first CAS
// on `next` wins) and swings tail_ to it with one CAS, taking slot 0 for itself. Every late
// producer of a block can do the swing, so none waits for another: push is lock-free, and wait-free
// except at block switches.
//
// Pop. The consumer reads slots in claim order: it waits for the flag of the next slot, moves
// the value out, clears the flag, and at the end of a block follows `next`. A producer's
// claims increase, so its items leave in the order it pushed them; and since claims are
// ordered by one atomic word, pushes ordered by happens-before (thread A pushes, then tells
// B, which pushes) also leave in that order, whichever threads made them.
//
// Reclamation. Only late producers touch a block other than through their own slot, and the
// consumer leaves a block only after every slot's flag is set, so slot writers need no
// reference. Late producers do (a split reference count): each late claim on a block is
// counted in tail_'s index bits, the producer that swings tail_ away adds that count to the
// block's `refs`, and each late producer and the consumer subtract one when done. Whoever
// brings `refs` to zero gives the block back; until then no one can reuse it, so a stale
// block address in a late producer is always still that block (no ABA).
//
// Reuse. The consumer keeps the blocks it is done with in a private list and puts them in
// kHandoffSlots atomic slots from which a late producer takes one with an exchange (no ABA:
// only the consumer fills a slot, producers only empty one). In a steady flow every block
// switch reuses a block the consumer emptied, so push and pop allocate nothing. When pop
// finds the queue empty it frees private spares beyond kIdleSpares, so a burst's memory is
// returned once the burst is drained; the rest is freed by the destructor.
//
// Sleep check. push's fetch_add is seq_cst and maybe_nonempty() loads tail_ seq_cst. A
// consumer that stores "about to sleep" (seq_cst) and then calls maybe_nonempty() either sees
// every push whose fetch_add came before its load, or the producer's next seq_cst operation
// (EventLoop::post's exchange on its wake latch) sees the consumer's store: one of them acts.
// maybe_nonempty() is true from a push's claim until its item is popped, so a claimed slot
// whose value is not yet in place keeps the consumer awake instead of letting it sleep.
//
// Progress and limits. A producer preempted between its claim and its flag store holds the
// consumer at that slot (pop reports nothing; maybe_nonempty stays true) but no producer.
// Block addresses must fit in 48 bits: Linux gives user space addresses below 2^47 (2^48
// on arm64) unless a program asks for more, but a heap that tags its pointers (arm64 MTE
// heap tagging) does not fit, and the first block allocation aborts with a message. Late
// claims on one block must fit in the 16 index bits: up to 65536 - kSlots threads may be
// inside push at one block switch.
//
// Why this design: see the measurements in docs/micro-benchmarks.md (bench/micro/queue_micro).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace ucp {

/// Owned by one object (an EventLoop owns the queue its `post` feeds). `push` may be called
/// from any thread; `pop` and `maybe_nonempty` only from the one consumer thread. Destroy it
/// when no thread can push any more: queued items are destroyed (not run) with it.
template <class T>
class MpscQueue {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "a claimed slot must be filled: moving the value in must not throw");

 public:
  MpscQueue() : head_(Block::create()), tail_(pack(head_, 0)) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;
  ~MpscQueue() {
    while (pop()) {
    }
    destroy_chain(head_);
    destroy_chain(spares_);
    for (std::atomic<Block*>& slot : handoff_) Block::destroy(slot.load());
    Block::destroy(returned_.load());
  }

  /// Any thread. Allocates only when no emptied block is at hand (may throw bad_alloc;
  /// nothing is queued then).
  void push(T&& value) {
    for (;;) {
      // seq_cst: the sleep check pairs with this (see "Sleep check" above).
      const uintptr_t claim = tail_.fetch_add(kOneClaim, std::memory_order_seq_cst);
      Block* block = block_of(claim);
      const size_t index = index_of(claim);
      if (index < kSlots) [[likely]] {
        block->fill(index, std::move(value));
        return;
      }
      if (push_late(block, value)) return;
    }
  }
  /// Any thread. The copy is made before a slot is claimed, so a copy that throws queues
  /// nothing and leaves no hole.
  void push(const T& value) { push(T(value)); }

  /// Consumer thread only. Empty when nothing is queued or the oldest claimed slot is still
  /// being filled.
  std::optional<T> pop() {
    if (head_index_ == kSlots && !next_block()) return std::nullopt;
    std::atomic<bool>& ready = head_->ready[head_index_];
    if (!ready.load(std::memory_order_acquire)) {
      if (spare_count_ > kIdleSpares) trim_spares();
      return std::nullopt;
    }
    T& slot = head_->values.at[head_index_];
    std::optional<T> value(std::move(slot));
    std::destroy_at(&slot);
    ready.store(false, std::memory_order_relaxed);
    ++head_index_;
    return value;
  }

  /// Consumer thread only: true from the moment a push has claimed a slot until its item is
  /// popped (the item may not be visible to pop yet). seq_cst; see "Sleep check" above.
  bool maybe_nonempty() const noexcept {
    return tail_.load(std::memory_order_seq_cst) != pack(head_, head_index_);
  }

 private:
  // tail_ = block address (low 48 bits) | claimed slots (high 16 bits).
  static constexpr int kIndexShift = 48;
  static constexpr uintptr_t kOneClaim = uintptr_t{1} << kIndexShift;
  static constexpr size_t kBlockBytes = 4096;
  static constexpr size_t kHeaderBytes = 2 * sizeof(void*);
  static constexpr size_t kValueAlign = std::max<size_t>(alignof(T), 64);
  static constexpr size_t kHandoffSlots = 2;
  static constexpr size_t kIdleSpares = 2;

  static constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
  static constexpr size_t block_bytes(size_t slots) {
    return round_up(kHeaderBytes + slots, kValueAlign) + slots * sizeof(T);
  }
  static constexpr size_t kSlots = [] {
    size_t slots = 1;  // a T bigger than a block gets a block of its own
    while (block_bytes(slots + 1) <= kBlockBytes) ++slots;
    return slots;
  }();
  static_assert(sizeof(uintptr_t) == 8, "tail_ packs a 48-bit address and a 16-bit index");

  struct Block {
    std::atomic<Block*> next{nullptr};
    std::atomic<int64_t> refs{0};  // split count, see "Reclamation"
    std::atomic<bool> ready[kSlots] = {};
    union Values {  // slots are constructed by fill() and destroyed by pop()
      Values() noexcept {}
      ~Values() {}
      alignas(kValueAlign) T at[kSlots];
    } values;

    void fill(size_t index, T&& from) noexcept {
      std::construct_at(&values.at[index], std::move(from));
      ready[index].store(true, std::memory_order_release);
    }
    static Block* create() {
      auto* block = new Block;
      if ((reinterpret_cast<uintptr_t>(block) >> kIndexShift) != 0) {
        // Linux gives user space addresses below 2^47 (2^48 on arm64) unless asked for
        // more; a heap that tags its pointers (arm64 MTE heap tagging) breaks the packing.
        std::fputs("ucp::MpscQueue: heap address above 2^48 (tagged heap?)\n", stderr);
        std::abort();
      }
      return block;
    }
    static void destroy(Block* block) noexcept { delete block; }
  };

  static uintptr_t pack(Block* block, size_t index) noexcept {
    return reinterpret_cast<uintptr_t>(block) | (uintptr_t{index} << kIndexShift);
  }
  static Block* block_of(uintptr_t word) noexcept {
    return reinterpret_cast<Block*>(word & (kOneClaim - 1));
  }
  static size_t index_of(uintptr_t word) noexcept { return word >> kIndexShift; }

  // Our claim on `full` came after its last slot; it counts as one reference to `full`.
  // Returns true once `value` is queued, false to claim again on the new tail block.
  bool push_late(Block* full, T& value) {
    Block* next = full->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      Block* fresh = take_handoff();
      if (fresh == nullptr) {
        try {
          fresh = Block::create();
        } catch (...) {
          release(full, -1);
          throw;
        }
      }
      if (full->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
        next = fresh;
      } else {
        give_back(fresh);  // another late producer linked its block first
      }
    }
    uintptr_t seen = tail_.load(std::memory_order_relaxed);
    while (block_of(seen) == full) {
      if (tail_.compare_exchange_weak(seen, pack(next, 1), std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
        // Hand over the late claims tail_ counted, plus the consumer's reference, minus ours.
        release(full, static_cast<int64_t>(index_of(seen) - kSlots));
        next->fill(0, std::move(value));
        return true;
      }
    }
    release(full, -1);
    return false;
  }

  // A producer's reference changes; if `full` is done with, the consumer gets it back.
  void release(Block* full, int64_t delta) noexcept {
    if (full->refs.fetch_add(delta, std::memory_order_acq_rel) + delta == 0) give_back(full);
  }
  void give_back(Block* block) noexcept {
    Block::destroy(returned_.exchange(block, std::memory_order_acq_rel));  // rare: keep one
  }
  Block* take_handoff() noexcept {
    for (std::atomic<Block*>& slot : handoff_) {
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      if (Block* block = slot.exchange(nullptr, std::memory_order_acquire)) return block;
    }
    return nullptr;
  }

  // Consumer: every slot of head_ is popped; move on if a late producer has linked a block.
  bool next_block() noexcept {
    Block* next = head_->next.load(std::memory_order_acquire);
    if (next == nullptr) return false;
    Block* done = std::exchange(head_, next);
    head_index_ = 0;
    if (done->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) keep_spare(done);
    if (returned_.load(std::memory_order_relaxed) != nullptr) {
      if (Block* block = returned_.exchange(nullptr, std::memory_order_acquire)) {
        keep_spare(block);
      }
    }
    fill_handoff();
    return true;
  }
  void keep_spare(Block* block) noexcept {  // its flags are all clear: pop cleared them
    block->refs.store(0, std::memory_order_relaxed);
    block->next.store(spares_, std::memory_order_relaxed);
    spares_ = block;
    ++spare_count_;
  }
  void fill_handoff() noexcept {
    for (std::atomic<Block*>& slot : handoff_) {
      if (spares_ == nullptr) return;
      if (slot.load(std::memory_order_relaxed) != nullptr) continue;  // only we fill slots
      Block* block = std::exchange(spares_, spares_->next.load(std::memory_order_relaxed));
      --spare_count_;
      block->next.store(nullptr, std::memory_order_relaxed);
      slot.store(block, std::memory_order_release);
    }
  }
  void trim_spares() noexcept {
    while (spare_count_ > kIdleSpares) {
      Block::destroy(std::exchange(spares_, spares_->next.load(std::memory_order_relaxed)));
      --spare_count_;
    }
  }
  static void destroy_chain(Block* block) noexcept {
    while (block != nullptr) {
      Block::destroy(std::exchange(block, block->next.load(std::memory_order_relaxed)));
    }
  }

  // Consumer-owned.
  Block* head_;
  size_t head_index_ = 0;
  Block* spares_ = nullptr;  // emptied blocks, linked through `next`
  size_t spare_count_ = 0;
  // Shared, each group on its own cache line.
  alignas(64) std::atomic<Block*> handoff_[kHandoffSlots] = {};  // filled by the consumer
  std::atomic<Block*> returned_{nullptr};  // a block a producer was last to release
  alignas(64) std::atomic<uintptr_t> tail_;
  char pad_[64 - sizeof(std::atomic<uintptr_t>)];
};

}  // namespace ucp
