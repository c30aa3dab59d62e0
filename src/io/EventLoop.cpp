#include "ucp/io/EventLoop.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/eventfd.h>
#include <unistd.h>

#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"
#include "ucp/memory/MemoryPool.h"

#include "Backend.h"
#include "BackendSelection.h"
#include "ReceiveBuffers.h"

namespace ucp {

namespace {

void log_spawned_exception(std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    LOG_ERROR("a spawned coroutine ended with an exception: {}", e.what());
  } catch (...) {
    LOG_ERROR("a spawned coroutine ended with a non-standard exception");
  }
}

// A single-shot read without a free registered buffer reads into a pool block; this size
// keeps the block (with its pool header) in the 4 KiB class.
constexpr size_t kPooledReceiveBytes = 4096 - MemoryPool::kHeaderBytes;

}  // namespace

EventLoop::EventLoop(const LoopOptions& options)
    : options_(options), spawned_(&log_spawned_exception) {}

Result<std::unique_ptr<EventLoop>> EventLoop::create(const LoopOptions& options,
                                                     std::string* warnings,
                                                     const EventLoop* share_with) {
  std::string notes;
  std::unique_ptr<EventLoop> loop(new EventLoop(options));
  auto backend = detail::create_backend(*loop, options, share_with, notes);
  if (!backend) return Unexpected{backend.error()};
  loop->backend_ = std::move(*backend);

  int fd = ::eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return Unexpected{error_from_errno(errno)};
  loop->wake_fd_ = UniqueFd(fd);
  loop->wake_op_.loop = loop.get();
  loop->wake_op_.on_complete = &on_wakeup;
  loop->wake_op_.code = detail::OpCode::kRead;
  loop->wake_op_.fd = loop->wake_fd_.get();
  loop->wake_op_.data = &loop->wake_value_;
  loop->wake_op_.size = sizeof loop->wake_value_;
  loop->backend_->attach(fd);  // long-lived: epoll keeps it registered
  if (warnings) *warnings += notes;
  return loop;
}

std::string EventLoop::describe_setup_error(std::error_code error, const LoopOptions& options) {
  return detail::describe_backend_setup_error(error, options);
}

EventLoop::~EventLoop() {
  // A loop that never ran has submitted nothing: its suspended frames can go at once.
  // (One that ran has already cancelled and reaped everything at the end of run().)
  spawned_.destroy_all();
}

BackendKind EventLoop::backend_kind() const noexcept { return backend_->kind(); }
const char* EventLoop::backend_name() const noexcept { return backend_->name(); }
const LoopCapabilities& EventLoop::capabilities() const noexcept {
  return backend_->capabilities();
}
std::string EventLoop::describe() const {
  std::string out = backend_->describe();
  if (options_.busy_poll_us > 0) {
    out += " busy_poll_us=" + std::to_string(options_.busy_poll_us) +
           (capabilities().napi_busy_poll ? " napi_busy_poll=on" : " napi_busy_poll=off");
  } else {
    out += " busy_poll=off";
  }
  return out;
}
const LoopStats& EventLoop::stats() const noexcept { return backend_->stats(); }
uint64_t EventLoop::in_flight() const noexcept { return backend_->in_flight(); }

bool EventLoop::in_loop_thread() const noexcept {
  return thread_id_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

bool EventLoop::submit(detail::Operation& op) noexcept {
  if (io_shut_down_) {
    op.result = -ECANCELED;
    return false;
  }
  return backend_->submit(op);
}

bool EventLoop::try_now(detail::Operation& op) noexcept {
  return !io_shut_down_ && backend_->try_now(op);
}

void EventLoop::cancel(detail::Operation& op) noexcept {
  if (!io_shut_down_) backend_->cancel(op);  // at shutdown everything is cancelled anyway
}

void EventLoop::attach(int fd) noexcept { backend_->attach(fd); }
void EventLoop::detach(int fd) noexcept { backend_->detach(fd); }

detail::ReceiveBuffers* EventLoop::receive_buffers() noexcept {
  return backend_->receive_buffers();
}

BufferLease EventLoop::borrow_receive_buffer() {
  BufferLease lease = backend_->borrow_registered_buffer();
  if (lease.source() == BufferLease::Source::kNone) {
    lease = BufferLease::from_pool(kPooledReceiveBytes);
  }
  return lease;
}

void EventLoop::post(UniqueFunction<void()> task) {
  posted_.push(std::move(task));
  // Coalesced wake-up: only the poster that flips the latch writes the eventfd.
  if (!wake_pending_.exchange(true, std::memory_order_seq_cst)) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
    wakeups_written_.fetch_add(1, std::memory_order_relaxed);
  }
}

void EventLoop::stop() noexcept {
  stop_requested_.store(true, std::memory_order_seq_cst);
  if (!wake_pending_.exchange(true, std::memory_order_seq_cst)) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  }
}

// ---- ring messages ----

void EventLoop::set_message_handler(UniqueFunction<void(int32_t)> handler) {
  message_handler_ = std::move(handler);
  // Open only while the loop runs: a message to a disabled ring fails (EBADFD), and one that
  // arrives after the last reap of a DEFER_TASKRUN ring is lost with its value.
  if (message_handler_ && enabled_ && !io_shut_down_ && in_loop_thread()) open_mailbox();
}

void EventLoop::open_mailbox() noexcept {
  if (!capabilities().ring_messages) return;  // nothing can arrive: senders are refused
  mailbox_.fetch_or(kMailboxOpen, std::memory_order_acq_rel);
}

bool EventLoop::reserve_incoming_message() noexcept {
  if (!(mailbox_.load(std::memory_order_acquire) & kMailboxOpen)) return false;
  // Count first, then look: a shutdown that closes the mailbox after this add sees the count
  // and waits for the message; one that closed it before makes us take the count back.
  if (mailbox_.fetch_add(1, std::memory_order_acq_rel) & kMailboxOpen) return true;
  release_incoming_message();
  return false;
}

void EventLoop::release_incoming_message() noexcept {
  mailbox_.fetch_sub(1, std::memory_order_acq_rel);
}

uint64_t EventLoop::messages_on_their_way() const noexcept {
  return mailbox_.load(std::memory_order_acquire) & ~kMailboxOpen;
}

void EventLoop::dispatch_messages() {
  if (arrived_messages_.empty()) return;
  // Pairs with the senders' reservations (RMWs, so one release sequence): what a sender did
  // before send() happens-before the handler. The kernel carries the value itself, which
  // neither the memory model nor TSan can see.
  (void)mailbox_.load(std::memory_order_acquire);
  handling_messages_.swap(arrived_messages_);
  for (int32_t value : handling_messages_) {
    if (message_handler_) message_handler_(value);
    release_incoming_message();  // handled: a shutdown no longer waits for it
  }
  handling_messages_.clear();
}

// ---- the loop ----

std::coroutine_handle<> EventLoop::on_wakeup(detail::IoContext& context, int32_t,
                                             uint32_t) noexcept {
  static_cast<WakeOperation&>(context).loop->wake_armed_ = false;
  return {};
}

void EventLoop::arm_wakeup() noexcept {
  if (wake_armed_ || io_shut_down_) return;
  wake_armed_ = backend_->submit(wake_op_);  // refused when the SQ is full: next iteration
}

void EventLoop::run() {
  thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  if (!enabled_) {
    if (auto enabled = backend_->enable(); !enabled) {
      LOG_ERROR("cannot enable the {} backend on its loop thread: {}", backend_->name(),
                enabled.error().message());
      return;
    }
    enabled_ = true;
  }
  if (message_handler_) open_mailbox();
  while (!stop_requested_.load(std::memory_order_relaxed)) run_once();
  shutdown_io();
}

void EventLoop::poll(bool may_block) {
  std::chrono::nanoseconds timeout{-1};  // no timer: wait for completions only
  if (may_block) {
    const Clock::time_point next = timers_.next_key();
    if (next != Clock::time_point::max()) {
      timeout = std::max(next - Clock::now(), Clock::duration::zero());
      if (timeout.count() == 0) may_block = false;  // a timer is due: just look
    }
  }
  backend_->poll(may_block, timeout, ready_, options_.cqe_batch);
  now_ = Clock::now();
  timers_.fire_due(now_);
}

void EventLoop::run_once() {
  run_posted();
  // Posted tasks may have started coroutines that wrote. With coroutines ready, the hooks
  // wait for them (end of resume_ready), so that what those write joins the same send.
  if (ready_.empty()) run_pre_submit_hooks();
  arm_wakeup();
  bool may_block = ready_.empty();
  if (!may_block || options_.busy_poll_us == 0 || !busy_poll()) {
    if (may_block) {
      // About to sleep: open the latch, then look again (pairs with post()'s exchange).
      wake_pending_.store(false, std::memory_order_seq_cst);
      if (posted_.maybe_nonempty() || stop_requested_.load(std::memory_order_seq_cst)) {
        may_block = false;
      }
    }
    poll(may_block);
    wake_pending_.store(true, std::memory_order_relaxed);
  }
  dispatch_messages();
  resume_ready();
}

// Instead of sleeping at once, look for work for up to busy_poll_us: a completion that arrives
// meanwhile is taken without the wake-up of a sleeping thread (the scheduler's latency, often
// tens of microseconds). The latch stays closed while spinning, so a post() writes no eventfd:
// the spin sees the queue itself. True when it found work (completions delivered, a task
// posted, a timer due, a stop asked for); false when the time ran out and the loop should
// sleep as usual.
bool EventLoop::busy_poll() noexcept {
  LoopStats& stats = backend_->stats();
  ++stats.busy_polls;
  const Clock::time_point start = Clock::now();
  const Clock::time_point timer_due = timers_.next_key();
  const Clock::time_point spin_end = start + std::chrono::microseconds(options_.busy_poll_us);
  for (;;) {
    backend_->poll(false, std::chrono::nanoseconds{0}, ready_, options_.cqe_batch);
    const Clock::time_point now = Clock::now();
    if (!ready_.empty() || !arrived_messages_.empty() || hooks_head_ != nullptr ||
        posted_.maybe_nonempty() || stop_requested_.load(std::memory_order_relaxed) ||
        now >= timer_due) {
      ++stats.busy_poll_hits;
      now_ = now;
      timers_.fire_due(now_);
      return true;
    }
    if (now >= spin_end) return false;
  }
}

void EventLoop::resume_ready() {
  // Resume after the completions are delivered: a coroutine may prepare operations, finish,
  // or free its context. Hooks run once nothing is ready, so they see all this iteration's
  // work; they may make coroutines ready again (a writer whose send could not start).
  while (!ready_.empty() || hooks_head_ != nullptr) {
    while (!ready_.empty()) {
      resuming_.swap(ready_);
      for (auto coroutine : resuming_) coroutine.resume();
      resuming_.clear();
    }
    run_pre_submit_hooks();
  }
}

bool EventLoop::hook_linked(const detail::PreSubmitHook& hook) const noexcept {
  return hook.prev != nullptr || hooks_head_ == &hook;
}

void EventLoop::run_before_submit(detail::PreSubmitHook& hook) noexcept {
  if (hook_linked(hook)) return;
  hook.prev = hooks_tail_;
  hook.next = nullptr;
  if (hooks_tail_) {
    hooks_tail_->next = &hook;
  } else {
    hooks_head_ = &hook;
  }
  hooks_tail_ = &hook;
}

void EventLoop::cancel_before_submit(detail::PreSubmitHook& hook) noexcept {
  if (!hook_linked(hook)) return;
  if (hook.prev) {
    hook.prev->next = hook.next;
  } else {
    hooks_head_ = hook.next;
  }
  if (hook.next) {
    hook.next->prev = hook.prev;
  } else {
    hooks_tail_ = hook.prev;
  }
  hook.prev = hook.next = nullptr;
}

void EventLoop::run_pre_submit_hooks() noexcept {
  // One at a time from the head: a hook may add or cancel others while it runs.
  while (hooks_head_ != nullptr) {
    detail::PreSubmitHook& hook = *hooks_head_;
    cancel_before_submit(hook);
    hook.run(hook);
  }
}

void EventLoop::run_posted() {
  while (auto task = posted_.pop()) (*task)();
}

void EventLoop::shutdown_io() noexcept {
  if (io_shut_down_) return;
  io_shut_down_ = true;  // from here, new operations are refused with ECANCELED
  // Refuse new messages, but wait for those already reserved: with DEFER_TASKRUN only this
  // thread can reap them, and a message left behind is a value (an fd) lost for good.
  mailbox_.fetch_and(~kMailboxOpen, std::memory_order_acq_rel);
  // Run what was posted before stop (a hand-off must still close its fd), then cancel every
  // operation in flight and reap until the kernel holds nothing of ours: a buffer or frame
  // freed under an in-flight operation would be written after its death.
  run_posted();
  for (int round = 0; round < 1000 && (backend_->in_flight() > 0 || messages_on_their_way() > 0);
       ++round) {
    if (round % 50 == 0) backend_->cancel_all();
    backend_->poll(true, std::chrono::milliseconds(10), ready_, 0);
    now_ = Clock::now();
    timers_.fire_due(now_);
    dispatch_messages();
    resume_ready();
    run_posted();
  }
  if (backend_->in_flight() > 0) {
    LOG_ERROR("event loop stopped with {} operations still in flight", backend_->in_flight());
  }
  if (messages_on_their_way() > 0) {
    LOG_ERROR("event loop stopped with {} ring messages announced but never received",
              messages_on_their_way());
  }
  // Coroutines still suspended wait on nothing the kernel holds: destroy them now.
  spawned_.destroy_all();
  run_posted();
}

}  // namespace ucp
