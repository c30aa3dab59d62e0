#pragma once
// Channel<T>: a bounded queue between coroutines, on one loop or across loops.
//
//   ucp::Channel<Job> jobs(64);                        // at most 64 items waiting
//   // producer, on any loop:
//   if (!co_await jobs.send(loop, std::move(job))) ... // closed (or cancelled): not delivered
//   // consumer, on any loop:
//   while (auto job = co_await jobs.receive(loop)) handle(*job);
//   // job.error() == ucp::ChannelErrc::kClosed: closed and drained
//
// - send() completes at once while there is room (or a receiver waits); otherwise the sender
//   waits, its item kept in its own awaiter, until a receiver makes room. receive() takes the
//   oldest item, or waits. Waiters are served first come, first served.
// - Each operation names the loop its coroutine runs on: a coroutine that has to wait is resumed
//   on that loop — through EventLoop::schedule when the party that wakes it runs on the same
//   thread, through EventLoop::post when it runs on another.
// - close() (any thread) wakes everyone: waiting senders fail with kClosed (their items were
//   not delivered), receivers get the items still queued, then kClosed.
// - send() and receive() are cancellable awaiters (with_stop, with_timeout): a cancelled send
//   either delivered its item (it reports success) or did not (operation_canceled); a cancelled
//   receive either took an item (it returns it) or did not. Items are never lost or duplicated
//   by a cancel.
// - Capacity 0 is a rendezvous: a send completes only when a receiver takes the item.
//
// One mutex guards the queue and the wait lists; nothing is done under it but moving items and
// queuing resumptions. A coroutine destroyed while it waits (its loop shut down) leaves the wait
// list; an item handed to a receiver that dies before it resumes dies with it.
//
// Thread contract: send, receive, close, try_send and try_receive from any loop thread. The
// channel must outlive every operation on it.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <mutex>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"

namespace ucp {

enum class ChannelErrc : int {
  kClosed = 1,  // the channel was closed (and, for receive, drained)
};
const std::error_category& channel_category() noexcept;
inline std::error_code make_error_code(ChannelErrc e) noexcept {
  return {static_cast<int>(e), channel_category()};
}

}  // namespace ucp

template <>
struct std::is_error_code_enum<ucp::ChannelErrc> : std::true_type {};

namespace ucp {

namespace detail {

class ChannelCore;
class ChannelWaiter;

/// Resumption of a waiter on another loop, in flight in that loop's task queue. Shared by the
/// posted task and the waiter; the waiter abandons it if it dies before the task runs.
struct ChannelWakeTicket {
  std::coroutine_handle<> handle;
  std::atomic<int> references{2};
  bool abandoned = false;  // written and read on the waiter's loop thread only
};

struct WaitList {
  ChannelWaiter* head = nullptr;
  ChannelWaiter* tail = nullptr;
};

/// What both awaiters share: a node of a wait list, the loop to resume on, and the state that
/// the channel's mutex guards.
class ChannelWaiter {
 public:
  enum class State : uint8_t {
    kIdle,       // not waiting (yet)
    kWaiting,    // in a wait list
    kDone,       // served (item moved, or closed): its resumption is queued
    kCancelled,  // cancel() won: left the list, its resumption is queued
  };

 protected:
  friend class ChannelCore;
  ChannelWaiter(ChannelCore& core, EventLoop& loop) noexcept : core_(core), loop_(loop) {}
  ChannelWaiter(const ChannelWaiter&) = delete;
  ChannelWaiter& operator=(const ChannelWaiter&) = delete;
  ~ChannelWaiter();

  ChannelCore& core_;
  EventLoop& loop_;
  WaitList* list_ = nullptr;  // the list it waits in (senders or receivers)
  ChannelWaiter* prev_ = nullptr;
  ChannelWaiter* next_ = nullptr;
  std::coroutine_handle<> caller_;
  ChannelWakeTicket* ticket_ = nullptr;  // set by a waker on another thread
  std::error_code error_;
  State state_ = State::kIdle;
  bool queued_ = false;  // ever put in a wait list (so the destructor must look)
};

/// The non-template half of Channel: the lock, the wait lists, and waking.
class ChannelCore {
 protected:
  ChannelCore() = default;
  ChannelCore(const ChannelCore&) = delete;
  ChannelCore& operator=(const ChannelCore&) = delete;

  // All of these with mutex_ held.
  static void push(WaitList& list, ChannelWaiter& waiter) noexcept;
  static ChannelWaiter* pop(WaitList& list) noexcept;
  static void unlink(WaitList& list, ChannelWaiter& waiter) noexcept;
  /// `waiter` is served (or failed with `error`): its coroutine resumes on its own loop.
  static void wake(ChannelWaiter& waiter, std::error_code error);
  /// cancel() of a waiter: if it still waits, it leaves its list and resumes (its own thread).
  void cancel(ChannelWaiter& waiter) noexcept;
  /// The waiter resumed: drop our part of a cross-thread wake-up.
  static void finish(ChannelWaiter& waiter) noexcept;
  void close_locked();

  friend class ChannelWaiter;
  mutable std::mutex mutex_;
  WaitList senders_;
  WaitList receivers_;
  bool closed_ = false;
};

}  // namespace detail

template <class T>
class Channel : private detail::ChannelCore {
 public:
  /// At most `capacity` items wait in the channel (0: senders wait for receivers).
  explicit Channel(size_t capacity) : slots_(capacity) {}
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  class [[nodiscard]] SendAwaiter : public detail::ChannelWaiter {
   public:
    SendAwaiter(Channel& channel, EventLoop& loop, T value)
        : ChannelWaiter(channel, loop), channel_(channel), value_(std::move(value)) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) {
      std::lock_guard lock(channel_.mutex_);
      if (channel_.try_send_locked(value_, error_)) return false;
      caller_ = caller;
      state_ = State::kWaiting;
      queued_ = true;
      push(channel_.senders_, *this);
      return true;
    }
    /// Delivered, or why not: kClosed, operation_canceled.
    Result<void> await_resume() noexcept {
      finish(*this);
      if (state_ == State::kCancelled) return Unexpected{std::errc::operation_canceled};
      if (error_) return Unexpected{error_};
      return {};
    }
    void cancel() noexcept { channel_.ChannelCore::cancel(*this); }
    EventLoop& loop() const noexcept { return loop_; }

   private:
    friend class Channel;
    Channel& channel_;
    T value_;
  };

  class [[nodiscard]] ReceiveAwaiter : public detail::ChannelWaiter {
   public:
    ReceiveAwaiter(Channel& channel, EventLoop& loop)
        : ChannelWaiter(channel, loop), channel_(channel) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) {
      std::lock_guard lock(channel_.mutex_);
      if (channel_.try_receive_locked(item_, error_)) return false;
      caller_ = caller;
      state_ = State::kWaiting;
      queued_ = true;
      push(channel_.receivers_, *this);
      return true;
    }
    /// The oldest item, or kClosed (closed and drained), or operation_canceled.
    Result<T> await_resume() noexcept(std::is_nothrow_move_constructible_v<T>) {
      finish(*this);
      if (item_) return std::move(*item_);
      if (state_ == State::kCancelled) return Unexpected{std::errc::operation_canceled};
      return Unexpected{error_};
    }
    void cancel() noexcept { channel_.ChannelCore::cancel(*this); }
    EventLoop& loop() const noexcept { return loop_; }

   private:
    friend class Channel;
    Channel& channel_;
    std::optional<T> item_;
  };

  /// `loop`: the loop the calling coroutine runs on.
  SendAwaiter send(EventLoop& loop, T value) { return SendAwaiter(*this, loop, std::move(value)); }
  ReceiveAwaiter receive(EventLoop& loop) { return ReceiveAwaiter(*this, loop); }

  /// Without waiting: true when `value` was delivered (moved from); false when the channel is
  /// full or closed (`value` untouched).
  bool try_send(T&& value) {
    std::lock_guard lock(mutex_);
    std::error_code error;
    return try_send_locked(value, error) && !error;
  }
  /// Without waiting: the oldest item, or nothing (empty, or closed and drained).
  std::optional<T> try_receive() {
    std::lock_guard lock(mutex_);
    std::optional<T> item;
    std::error_code error;
    try_receive_locked(item, error);
    return item;
  }
  /// Wakes every waiter (see above). Idempotent.
  void close() {
    std::lock_guard lock(mutex_);
    close_locked();
  }
  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  /// Items waiting in the channel (not counting senders that wait with theirs).
  size_t size() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  size_t capacity() const noexcept { return slots_.size(); }

 private:
  // Both with mutex_ held. True when the operation completed (error set when it failed).
  bool try_send_locked(T& value, std::error_code& error) {
    if (closed_) {
      error = make_error_code(ChannelErrc::kClosed);
      return true;
    }
    if (detail::ChannelWaiter* waiter = pop(receivers_)) {  // a receiver waits: the queue is empty
      static_cast<ReceiveAwaiter*>(waiter)->item_.emplace(std::move(value));
      wake(*waiter, {});
      return true;
    }
    if (count_ == slots_.size()) return false;
    slots_[(head_ + count_) % slots_.size()].emplace(std::move(value));
    ++count_;
    return true;
  }
  bool try_receive_locked(std::optional<T>& item, std::error_code& error) {
    if (count_ > 0) {
      item.emplace(std::move(*slots_[head_]));
      slots_[head_].reset();
      head_ = (head_ + 1) % slots_.size();
      --count_;
      if (detail::ChannelWaiter* waiter = pop(senders_)) {  // the room just made goes to it
        slots_[(head_ + count_) % slots_.size()].emplace(
            std::move(static_cast<SendAwaiter*>(waiter)->value_));
        ++count_;
        wake(*waiter, {});
      }
      return true;
    }
    if (detail::ChannelWaiter* waiter = pop(senders_)) {  // capacity 0: straight from the sender
      item.emplace(std::move(static_cast<SendAwaiter*>(waiter)->value_));
      wake(*waiter, {});
      return true;
    }
    if (closed_) {
      error = make_error_code(ChannelErrc::kClosed);
      return true;
    }
    return false;
  }

  std::vector<std::optional<T>> slots_;  // a ring: count_ items from head_
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace ucp
