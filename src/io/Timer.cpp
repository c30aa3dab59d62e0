#include "ucp/io/Timer.h"

#include <cassert>

#include "ucp/io/detail/TimerQueue.h"

namespace ucp {

TimerNode::~TimerNode() {
  if (queue_ != nullptr && index_ != kNotQueued) queue_->cancel(*this, /*remove=*/true);
}

}  // namespace ucp

namespace ucp::detail {

// A 4-ary heap: half the depth of a binary one, and the four children of a node share a
// cache line of pointers, so a sift touches fewer lines.
namespace {
constexpr uint32_t kArity = 4;
inline uint32_t parent_of(uint32_t index) noexcept { return (index - 1) / kArity; }
inline uint32_t first_child_of(uint32_t index) noexcept { return index * kArity + 1; }
}  // namespace

TimerQueue::~TimerQueue() {
  // Nodes outliving the loop must not reach back into a dead queue.
  for (TimerNode* node : heap_) {
    node->index_ = TimerNode::kNotQueued;
    node->queue_ = nullptr;
  }
}

void TimerQueue::add(TimerNode& node, Clock::time_point due) {
  const bool was_armed = node.armed();
  if (node.index_ != TimerNode::kNotQueued) {
    node.due_ = due;
    if (due < node.key_) {  // earlier than its entry: move the entry up
      node.key_ = due;
      sift_up(node.index_);
    }
  } else {
    node.due_ = due;
    push(node, due);
  }
  if (!was_armed) ++armed_;
}

void TimerQueue::cancel(TimerNode& node, bool remove) noexcept {
  if (node.index_ == TimerNode::kNotQueued) return;
  if (node.due_ != Clock::time_point::max()) --armed_;
  node.due_ = Clock::time_point::max();
  if (remove) erase(node);
}

size_t TimerQueue::fire_due(Clock::time_point now) noexcept {
  size_t fired = 0;
  while (!heap_.empty() && heap_.front()->key_ <= now) {
    TimerNode& node = *heap_.front();
    if (node.due_ == Clock::time_point::max()) {  // cancelled lazily
      erase(node);
      continue;
    }
    if (node.due_ > now) {  // moved later since it was queued: re-queue under its due time
      node.key_ = node.due_;
      sift_down(0);
      continue;
    }
    erase(node);
    node.due_ = Clock::time_point::max();
    --armed_;
    ++fired;
    node.fire_(node);  // may add or cancel timers, this one included
  }
  return fired;
}

void TimerQueue::push(TimerNode& node, Clock::time_point key) {
  node.key_ = key;
  node.queue_ = this;
  heap_.push_back(&node);
  node.index_ = static_cast<uint32_t>(heap_.size() - 1);
  sift_up(node.index_);
}

void TimerQueue::erase(TimerNode& node) noexcept {
  const uint32_t index = node.index_;
  assert(index < heap_.size() && heap_[index] == &node);
  node.index_ = TimerNode::kNotQueued;
  TimerNode* last = heap_.back();
  heap_.pop_back();
  if (last == &node) return;
  place(last, index);
  // The moved entry may belong above or below its new place.
  if (index > 0 && last->key_ < heap_[parent_of(index)]->key_) {
    sift_up(index);
  } else {
    sift_down(index);
  }
}

void TimerQueue::sift_up(uint32_t index) noexcept {
  TimerNode* node = heap_[index];
  while (index > 0) {
    const uint32_t parent = parent_of(index);
    if (!(node->key_ < heap_[parent]->key_)) break;
    place(heap_[parent], index);
    index = parent;
  }
  place(node, index);
}

void TimerQueue::sift_down(uint32_t index) noexcept {
  TimerNode* node = heap_[index];
  const auto size = static_cast<uint32_t>(heap_.size());
  for (;;) {
    const uint32_t first = first_child_of(index);
    if (first >= size) break;
    uint32_t smallest = first;
    const uint32_t end = first + kArity < size ? first + kArity : size;
    for (uint32_t child = first + 1; child < end; ++child) {
      if (heap_[child]->key_ < heap_[smallest]->key_) smallest = child;
    }
    if (!(heap_[smallest]->key_ < node->key_)) break;
    place(heap_[smallest], index);
    index = smallest;
  }
  place(node, index);
}

}  // namespace ucp::detail
