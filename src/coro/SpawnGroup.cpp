#include "ucp/coro/SpawnGroup.h"

namespace ucp {

void Spawned::promise_type::unhandled_exception() const noexcept {
  if (group->on_exception_) group->on_exception_(std::current_exception());
}

Spawned::promise_type::~promise_type() {
  if (group) group->unlink(*this);
}

// Lazy (so the group links it before its body can finish), and its frame frees itself when
// the body ends.
Spawned SpawnGroup::run(Task<> task) { co_await std::move(task); }

void SpawnGroup::spawn(Task<> task) { spawn(run(std::move(task))); }

void SpawnGroup::spawn(Spawned spawned) {
  const auto handle = std::exchange(spawned.handle_, {});
  handle.promise().group = this;
  link(handle.promise());
  handle.resume();
}

void SpawnGroup::destroy_all() noexcept {
  while (head_ != nullptr) {
    auto& promise = static_cast<Spawned::promise_type&>(*head_);
    std::coroutine_handle<Spawned::promise_type>::from_promise(promise).destroy();  // unlinks
  }
}

void SpawnGroup::link(Node& node) noexcept {
  node.prev = nullptr;
  node.next = head_;
  if (head_) head_->prev = &node;
  head_ = &node;
  ++size_;
}

void SpawnGroup::unlink(Node& node) noexcept {
  if (node.prev) node.prev->next = node.next;
  if (node.next) node.next->prev = node.prev;
  if (head_ == &node) head_ = node.next;
  --size_;
}

}  // namespace ucp
