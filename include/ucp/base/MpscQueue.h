#pragma once
// MpscQueue<T>: an unbounded lock-free multi-producer single-consumer FIFO
// (Dmitry Vyukov's node-based design). Producers on any thread `push`; exactly one
// consumer thread calls `pop`/`maybe_nonempty`. Per-producer order is preserved.
//
//   head_ (consumer) -> [stub] -> [a] -> [b] <- tail_ (producers exchange it)
//
// A push is one atomic exchange plus one store: wait-free for producers. Between those
// two steps the new node is not yet linked, so `pop` may briefly see an empty queue;
// `maybe_nonempty` still reports it, which is what a loop checks before sleeping.
// Why our own: the design asks for it (docs/design.md, section 4), and a node per push with no lock
// keeps posting threads from ever waiting on the loop thread.

#include <atomic>
#include <optional>
#include <utility>

namespace ucp {

template <class T>
class MpscQueue {
 public:
  MpscQueue() : head_(new Node), tail_(head_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;
  ~MpscQueue() {
    while (pop()) {
    }
    delete head_;
  }

  /// Any thread.
  void push(T value) {
    Node* node = new Node{std::move(value)};
    // seq_cst: EventLoop pairs this with its "about to sleep" flag (Dekker-style check).
    Node* prev = tail_.exchange(node, std::memory_order_seq_cst);
    prev->next.store(node, std::memory_order_release);
  }

  /// Consumer thread only.
  std::optional<T> pop() {
    Node* next = head_->next.load(std::memory_order_acquire);
    if (next == nullptr) return std::nullopt;
    std::optional<T> value(std::move(*next->value));
    next->value.reset();  // `next` becomes the new stub
    delete head_;
    head_ = next;
    return value;
  }

  /// Consumer thread only: true if a push has started (possibly not yet visible to pop).
  bool maybe_nonempty() const noexcept { return tail_.load(std::memory_order_seq_cst) != head_; }

 private:
  struct Node {
    std::optional<T> value;
    std::atomic<Node*> next{nullptr};
  };
  Node* head_;                           // consumer-owned
  alignas(64) std::atomic<Node*> tail_;  // producers; own cache line
};

}  // namespace ucp
