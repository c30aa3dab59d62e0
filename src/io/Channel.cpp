#include "ucp/io/Channel.h"

#include <string>

namespace ucp {

namespace {

class ChannelCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "channel"; }
  std::string message(int value) const override {
    return value == static_cast<int>(ChannelErrc::kClosed) ? "channel closed" : "channel error";
  }
};

void release(detail::ChannelWakeTicket* ticket) noexcept {
  if (ticket->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete ticket;
}

/// The task posted to a waiter's loop. Destroyed without running (its loop was destroyed
/// first), it only lets go of the ticket.
struct PostedWake {
  detail::ChannelWakeTicket* ticket;
  explicit PostedWake(detail::ChannelWakeTicket* t) noexcept : ticket(t) {}
  PostedWake(PostedWake&& other) noexcept : ticket(std::exchange(other.ticket, nullptr)) {}
  PostedWake(const PostedWake&) = delete;
  PostedWake& operator=(const PostedWake&) = delete;
  PostedWake& operator=(PostedWake&&) = delete;
  ~PostedWake() {
    if (ticket != nullptr) release(ticket);
  }
  void operator()() noexcept {
    detail::ChannelWakeTicket* t = std::exchange(ticket, nullptr);
    const bool abandoned = t->abandoned;  // its waiter died before we ran
    const std::coroutine_handle<> handle = t->handle;
    release(t);
    if (!abandoned) handle.resume();
  }
};

}  // namespace

const std::error_category& channel_category() noexcept {
  static const ChannelCategory category;
  return category;
}

namespace detail {

ChannelWaiter::~ChannelWaiter() {
  if (!queued_) return;  // never waited: nobody else knows this awaiter
  std::lock_guard lock(core_.mutex_);
  if (state_ == State::kWaiting) ChannelCore::unlink(*list_, *this);  // its frame dies waiting
  if (ticket_ != nullptr) {
    // Served from another thread, but dying before the posted resumption ran (its loop shut
    // down): that task must not resume a destroyed frame.
    ticket_->abandoned = true;
    release(std::exchange(ticket_, nullptr));
  }
}

void ChannelCore::push(WaitList& list, ChannelWaiter& waiter) noexcept {
  waiter.list_ = &list;
  waiter.prev_ = list.tail;
  waiter.next_ = nullptr;
  if (list.tail != nullptr) {
    list.tail->next_ = &waiter;
  } else {
    list.head = &waiter;
  }
  list.tail = &waiter;
}

ChannelWaiter* ChannelCore::pop(WaitList& list) noexcept {
  ChannelWaiter* waiter = list.head;
  if (waiter != nullptr) unlink(list, *waiter);
  return waiter;
}

void ChannelCore::unlink(WaitList& list, ChannelWaiter& waiter) noexcept {
  if (waiter.prev_ != nullptr) {
    waiter.prev_->next_ = waiter.next_;
  } else {
    list.head = waiter.next_;
  }
  if (waiter.next_ != nullptr) {
    waiter.next_->prev_ = waiter.prev_;
  } else {
    list.tail = waiter.prev_;
  }
  waiter.prev_ = waiter.next_ = nullptr;
}

void ChannelCore::wake(ChannelWaiter& waiter, std::error_code error) {
  waiter.error_ = error;
  waiter.state_ = ChannelWaiter::State::kDone;
  if (waiter.loop_.in_loop_thread()) {
    waiter.loop_.schedule(waiter.caller_);
    return;
  }
  // Another thread: the waiter resumes on its own loop. Done under the lock, so the waiter
  // (whose destructor takes it) is alive while the ticket is made and posted.
  auto* ticket = new ChannelWakeTicket;
  ticket->handle = waiter.caller_;
  waiter.ticket_ = ticket;
  waiter.loop_.post(PostedWake(ticket));
}

void ChannelCore::cancel(ChannelWaiter& waiter) noexcept {
  std::lock_guard lock(mutex_);
  if (waiter.state_ != ChannelWaiter::State::kWaiting) return;  // served first: that stands
  unlink(*waiter.list_, waiter);
  waiter.state_ = ChannelWaiter::State::kCancelled;
  waiter.loop_.schedule(waiter.caller_);  // cancel() runs on the waiter's own thread
}

void ChannelCore::finish(ChannelWaiter& waiter) noexcept {
  // The posted resumption has run (it resumed us); ours is the last reference.
  if (waiter.ticket_ != nullptr) release(std::exchange(waiter.ticket_, nullptr));
}

void ChannelCore::close_locked() {
  closed_ = true;
  while (ChannelWaiter* sender = pop(senders_))
    wake(*sender, make_error_code(ChannelErrc::kClosed));
  while (ChannelWaiter* receiver = pop(receivers_)) {
    wake(*receiver, make_error_code(ChannelErrc::kClosed));
  }
}

}  // namespace detail
}  // namespace ucp
