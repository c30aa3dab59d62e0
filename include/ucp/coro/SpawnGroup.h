#pragma once
// SpawnGroup: owner of detached coroutines ("spawned" tasks), e.g. one per connection.
//
// `spawn(task)` starts the task at once and forgets it: the frame destroys itself when
// the task finishes. The group counts the live ones, and its destructor destroys those
// still suspended, so nothing leaks when a loop is torn down. The owner (EventLoop) must
// make sure no I/O is in flight for them before that happens.
//
// An exception escaping a spawned task is reported through the group's handler (the loop
// logs it) and ends only that task.
//
// Thread contract: one thread (the owning loop's).

#include <coroutine>
#include <cstddef>
#include <exception>

#include "ucp/coro/Task.h"

namespace ucp {

class SpawnGroup {
 public:
  using ExceptionHandler = void (*)(std::exception_ptr) noexcept;

  explicit SpawnGroup(ExceptionHandler on_exception = nullptr) noexcept
      : on_exception_(on_exception) {}
  SpawnGroup(const SpawnGroup&) = delete;
  SpawnGroup& operator=(const SpawnGroup&) = delete;
  ~SpawnGroup() { destroy_all(); }

  /// Starts `task` now; it runs until its first suspension before spawn returns.
  void spawn(Task<> task);
  size_t size() const noexcept { return size_; }
  /// Destroys every live spawned frame (their Tasks' destructors run).
  void destroy_all() noexcept;

 private:
  struct Detached;
  struct Node {
    Node* prev = nullptr;
    Node* next = nullptr;
    std::coroutine_handle<> handle;
  };
  static Detached run(SpawnGroup* group, Task<> task);
  void link(Node& node) noexcept;
  void unlink(Node& node) noexcept;

  Node* head_ = nullptr;
  size_t size_ = 0;
  ExceptionHandler on_exception_;
};

}  // namespace ucp
