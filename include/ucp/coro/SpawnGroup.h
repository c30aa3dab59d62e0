#pragma once
// SpawnGroup: owner of detached coroutines ("spawned" tasks), e.g. one per connection.
//
// `spawn(task)` starts the task at once and forgets it: the frame destroys itself when
// the task finishes. The group counts the live ones, and its destructor destroys those
// still suspended, so nothing leaks when a loop is torn down. The owner (EventLoop) must
// make sure no I/O is in flight for them before that happens.
//
// A spawned task runs inside a small wrapper coroutine that the group links; a coroutine that
// returns Spawned is its own wrapper (no second frame).
//
// An exception escaping a spawned task is reported through the group's handler (the loop
// logs it) and ends only that task.
//
// Thread contract: one thread (the owning loop's).

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include "ucp/coro/Task.h"

namespace ucp {

class SpawnGroup;

namespace detail {
/// A spawned frame's link in its group's list.
struct SpawnNode {
  SpawnNode* prev = nullptr;
  SpawnNode* next = nullptr;
};
}  // namespace detail

/// A coroutine that a SpawnGroup owns from its start. spawn(Task) wraps the task in one; a
/// coroutine spawned by the thousand (TcpServer's, one per connection) returns one itself and
/// saves the wrapper's frame: its promise is the group's list node (the size of Task's), and
/// its frame frees itself when the body ends. Lazy: nothing runs before spawn(); dropping it
/// unspawned frees the frame.
class [[nodiscard]] Spawned {
 public:
  struct promise_type : PoolAllocated, detail::SpawnNode {
    Spawned get_return_object() noexcept {
      return Spawned{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept;
    ~promise_type();

    SpawnGroup* group = nullptr;
  };

  Spawned(Spawned&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Spawned& operator=(Spawned&&) = delete;
  ~Spawned() {
    if (handle_) handle_.destroy();
  }

 private:
  friend class SpawnGroup;
  explicit Spawned(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

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
  /// The same for a coroutine that is spawned already, without a wrapper.
  void spawn(Spawned spawned);
  size_t size() const noexcept { return size_; }
  /// Destroys every live spawned frame (their Tasks' destructors run).
  void destroy_all() noexcept;

 private:
  friend struct Spawned::promise_type;
  using Node = detail::SpawnNode;
  static Spawned run(Task<> task);
  void link(Node& node) noexcept;
  void unlink(Node& node) noexcept;

  Node* head_ = nullptr;
  size_t size_ = 0;
  ExceptionHandler on_exception_;
};

}  // namespace ucp
