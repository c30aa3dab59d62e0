#pragma once
// MultishotReceive: the state machine both multishot receives share, written once. A stream's
// bytes (MultishotRecv) and a socket's datagrams (MultishotRecvMsg) arrive the same way: one
// long-lived receive into the loop's receive buffers, each completion queued as an Entry for a
// reader that waits with wait() and is resumed only with news (data, the end, an error).
// Underneath, invisible to the reader:
//
// - Back-pressure: past Derived::kMaxQueued entries the receive is paused (cancelled) so a peer
//   that sends faster than its reader reads cannot take the loop's buffers; it resumes when the
//   reader waits again. The pause's cancel, like stop()'s, is swallowed: not news.
// - A dry pool: when the loop's buffers run out (the receive ends with ENOBUFS), the next
//   receive is one ordinary receive into a pool block (Derived's fallback), then the multishot
//   receive again.
// - A receive that ends with nothing to tell (a pause whose cancel completed after the reader
//   drained the queue, a dry pool, the kernel stopping it) is started again while the reader
//   waits.
//
// Derived (CRTP) supplies what differs: take(res, completion) queues what a completion brought
// (true) or notes the end of the stream (stream EOF); start_fallback() and fallback_op(), the
// ordinary receive; ran_dry() and idle(), for its counters and its owner. The functions are
// defined in src/io/MultishotReceive.ipp and instantiated once for each of the two.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstdint>
#include <utility>
#include <vector>

#include "ucp/base/Hook.h"
#include "ucp/io/detail/Operation.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

class ReceiveBuffers;

template <class Derived, class Entry>
class MultishotReceive : private Operation {
 public:
  MultishotReceive(const MultishotReceive&) = delete;
  MultishotReceive& operator=(const MultishotReceive&) = delete;

  /// Resumes `reader` once there is news, starting or resuming the receive as needed. False
  /// when there is news already (nothing to wait for), or when the receive cannot start
  /// (error() says why).
  bool wait(std::coroutine_handle<> reader) noexcept;
  /// Forgets a waiting reader without resuming it (its owner resumes it another way).
  void drop_waiter() noexcept { waiter_ = {}; }
  /// A reader waits for news. False once a completion has handed it to the loop to resume,
  /// which happens before it runs: whoever would resume it another way must not then.
  bool has_waiter() const noexcept { return static_cast<bool>(waiter_); }

  bool has_data() const noexcept { return queued_ > 0; }
  /// -errno of the error the reader is to hear, or 0.
  int32_t error() const noexcept { return error_; }
  /// An operation of the receive is in flight.
  bool busy() const noexcept { return state_ != State::kIdle; }
  /// Times the receive paused because the reader was kMaxQueued entries behind.
  uint64_t pauses() const noexcept { return pauses_; }
  EventLoop& loop() const noexcept { return loop_; }
  int fd() const noexcept { return Operation::fd; }

 protected:
  enum class State : uint8_t {
    kIdle,      // nothing in flight
    kArmed,     // the multishot receive is running
    kPausing,   // it was cancelled for back-pressure; its last completion is due
    kFallback,  // one ordinary receive into a pool block is running (the pool ran dry)
  };

  MultishotReceive(EventLoop& loop, int socket, OpCode kind) noexcept;
  ~MultishotReceive() = default;

  bool has_news() const noexcept { return queued_ > 0 || eof_ || error_ != 0; }
  /// Starts the multishot receive, or the fallback after ENOBUFS. False: error_ says why.
  bool start() noexcept;
  /// stop()'s common part: marks the receive stopped and cancels what is in flight (its last
  /// completion still arrives).
  void stop_receiving() noexcept;
  /// The fallback's completion has been taken in: the receive is idle, the reader hears the
  /// news if there is any.
  std::coroutine_handle<> fallback_done() noexcept {
    became_idle();
    return news();
  }
  /// The waiting reader, taken, when there is news for it.
  std::coroutine_handle<> news() noexcept {
    if (!has_news()) return {};
    return std::exchange(waiter_, {});
  }

  void push(const Entry& entry) { queue_.push_back(entry); }
  Entry& front() noexcept { return queue_[head_]; }
  void pop_front() noexcept {
    ++head_;
    if (--queued_ == 0) {  // steady state: the vector keeps its capacity, nothing is allocated
      queue_.clear();
      head_ = 0;
    }
  }
  /// Every entry still queued, for the owner's destructor (to give their buffers back).
  template <class F>
  void for_each_queued(F f) noexcept {
    for (size_t i = head_; i < queue_.size(); ++i) f(queue_[i]);
  }

  Operation& receive() noexcept { return *this; }

  EventLoop& loop_;
  ReceiveBuffers* buffers_;  // the loop's, asked once (they live as long as the loop)
  // Received, not yet consumed. Growable because a multishot receive can post a burst of
  // completions before a pause takes effect; never larger than the pool, whose buffers it
  // names (so 32-bit counts: never billions of them).
  std::vector<Entry> queue_;
  uint32_t head_ = 0;
  uint32_t queued_ = 0;
  std::coroutine_handle<> waiter_;
  uint64_t pauses_ = 0;
  int32_t error_ = 0;
  State state_ = State::kIdle;
  bool eof_ = false;       // a stream's end (datagram sockets have none)
  bool pool_dry_ = false;  // the loop's buffers ran out: the next start is the fallback
  bool stopped_ = false;

 private:
  friend HookAccess;
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  void became_idle() noexcept {
    state_ = State::kIdle;
    self().idle();
  }
  std::coroutine_handle<> on_receive(int32_t res, uint32_t completion) noexcept;
};

}  // namespace ucp::detail
