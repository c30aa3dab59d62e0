#include "ucp/coro/SpawnGroup.h"

namespace ucp {

// The detached wrapper: lazy (so the group links it before its body can finish), and its
// frame frees itself when the body ends (final_suspend does not suspend). Its promise is
// the group's intrusive list node.
struct SpawnGroup::Detached {
  struct promise_type : PoolAllocated {
    Node node;
    SpawnGroup* group = nullptr;

    Detached get_return_object() noexcept {
      return Detached{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept {
      if (group->on_exception_) group->on_exception_(std::current_exception());
    }
    ~promise_type() {
      if (group) group->unlink(node);
    }
  };
  std::coroutine_handle<promise_type> handle;
};

SpawnGroup::Detached SpawnGroup::run(SpawnGroup*, Task<> task) { co_await std::move(task); }

void SpawnGroup::spawn(Task<> task) {
  Detached detached = run(this, std::move(task));
  auto& promise = detached.handle.promise();
  promise.group = this;
  promise.node.handle = detached.handle;
  link(promise.node);
  detached.handle.resume();
}

void SpawnGroup::destroy_all() noexcept {
  while (head_ != nullptr) head_->handle.destroy();  // ~promise_type unlinks it
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
