#include "ucp/io/EventLoop.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

#include <sys/eventfd.h>
#include <unistd.h>

#include "ucp/io/FixedBuffers.h"
#include "ucp/log/Logger.h"

#include "BufferRing.h"
#include "IoUring.h"

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

}  // namespace

std::string IoFeatures::describe() const {
  std::string out;
  auto add = [&out](const char* name, bool on) {
    if (!out.empty()) out += ' ';
    out += name;
    out += on ? "=on" : "=off";
  };
  add("single_issuer", single_issuer);
  add("defer_taskrun", defer_taskrun);
  add("coop_taskrun", coop_taskrun);
  add("sqpoll", sqpoll);
  add("nodrop", nodrop);
  add("multishot_accept", multishot_accept);
  add("multishot_recv", multishot_recv);
  add("provided_buffer_ring", provided_buffer_ring);
  add("cancel_fd", cancel_fd);
  add("msg_ring", msg_ring);
  add("send_zc", send_zc);
  return out;
}

EventLoop::EventLoop(const LoopOptions& options)
    : options_(options), spawned_(&log_spawned_exception) {}

Result<std::unique_ptr<EventLoop>> EventLoop::create(const LoopOptions& options,
                                                     std::string* warnings) {
  std::string notes;
  auto ring = io::IoUring::create(options, notes);
  if (!ring) return Unexpected{ring.error()};
  std::unique_ptr<EventLoop> loop(new EventLoop(options));
  loop->ring_ = std::move(*ring);
  loop->message_context_.loop = loop.get();
  loop->message_context_.on_cqe = &on_message;
  loop->ring_->set_message_context(&loop->message_context_);

  int fd = ::eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return Unexpected{error_from_errno(errno)};
  loop->wake_fd_ = UniqueFd(fd);

  if (options.provided_buffers_count > 0) {
    if (!loop->ring_->features().multishot_recv) {
      notes +=
          "multishot_recv: the kernel lacks multishot receive (6.0+); using one recv per "
          "read\n";
    } else {
      auto buffers = io::BufferRing::create(*loop->ring_->raw(), options.provided_buffers_count,
                                            options.provided_buffer_size, 0);
      if (buffers) {
        loop->buffer_ring_ = std::move(*buffers);
        const_cast<IoFeatures&>(loop->ring_->features()).provided_buffer_ring = true;
      } else if (buffers.error() == io::SetupError::kProvidedBuffers) {
        return Unexpected{buffers.error()};  // asked-for memory the process cannot have: fatal
      } else {
        notes += "multishot_recv: cannot register a provided buffer ring (" +
                 buffers.error().message() + "); using one recv per read\n";
      }
    }
  }
  if (options.registered_buffers_count > 0) {
    auto fixed = loop->ring_->register_buffers(options.registered_buffers_count,
                                               options.registered_buffer_size);
    if (fixed) {
      loop->fixed_buffers_ = std::move(*fixed);
      // WRITE_FIXED on a socket has write(2) semantics: no MSG_NOSIGNAL, so a reset peer
      // would raise SIGPIPE. Ignore it unless the application installed its own handler.
      struct sigaction current {};
      if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
        ::signal(SIGPIPE, SIG_IGN);
      }
    } else {
      notes += io::describe_registration_error(fixed.error(), options.registered_buffers_count,
                                               options.registered_buffer_size) +
               "\n";
    }
  }
  if (warnings) *warnings += notes;
  return loop;
}

std::string EventLoop::describe_setup_error(std::error_code error, const LoopOptions& options) {
  return io::describe_setup_error(error, options);
}

EventLoop::~EventLoop() {
  // A loop that never ran has submitted nothing: its suspended frames can go at once.
  // (One that ran has already cancelled and reaped everything at the end of run().)
  spawned_.destroy_all();
}

const IoFeatures& EventLoop::features() const noexcept { return ring_->features(); }
const IoStats& EventLoop::stats() const noexcept { return ring_->stats(); }
uint64_t EventLoop::in_flight() const noexcept { return ring_->in_flight(); }
int EventLoop::ring_fd() const noexcept { return ring_->ring_fd(); }

bool EventLoop::in_loop_thread() const noexcept {
  return thread_id_.load(std::memory_order_relaxed) == std::this_thread::get_id();
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

void EventLoop::set_message_handler(UniqueFunction<void(int32_t)> handler) {
  message_handler_ = std::move(handler);
  // Open only while the ring is enabled: a message to a disabled ring fails (EBADFD), and
  // one that arrives after the last reap of a DEFER_TASKRUN ring is lost with its value.
  if (message_handler_ && enabled_ && !io_shut_down_ && in_loop_thread()) open_mailbox();
}

void EventLoop::open_mailbox() noexcept {
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

std::coroutine_handle<> EventLoop::on_message(IoContext& context, int32_t res, uint32_t) noexcept {
  // IORING_OP_MSG_RING: `res` is the sender's value, not a result of ours.
  static_cast<MessageContext&>(context).loop->arrived_messages_.push_back(res);
  return {};
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

std::coroutine_handle<> EventLoop::on_wakeup(IoContext& context, int32_t, uint32_t) noexcept {
  static_cast<WakeContext&>(context).loop->wake_armed_ = false;
  return {};
}

void EventLoop::arm_wakeup() {
  if (wake_armed_ || io_shut_down_) return;
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) return;  // retried next iteration
  io_uring_prep_read(sqe, wake_fd_.get(), &wake_value_, sizeof wake_value_, 0);
  wake_context_.on_cqe = &on_wakeup;
  wake_context_.loop = this;
  io_uring_sqe_set_data(sqe, &wake_context_);
  wake_armed_ = true;
}

void EventLoop::run() {
  thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  if (!enabled_) {
    if (auto enabled = ring_->enable(); !enabled) {
      LOG_ERROR("cannot enable the io_uring on its loop thread: {}", enabled.error().message());
      return;
    }
    enabled_ = true;
  }
  if (message_handler_) open_mailbox();
  while (!stop_requested_.load(std::memory_order_relaxed)) run_once();
  shutdown_io();
}

void EventLoop::run_once() {
  run_posted();
  // Posted tasks may have started coroutines that wrote. With coroutines ready, the hooks
  // wait for them (end of resume_ready), so that what those write joins the same send.
  if (ready_.empty()) run_pre_submit_hooks();
  arm_wakeup();
  bool may_block = ready_.empty();
  if (may_block) {
    // About to sleep: open the latch, then look again (pairs with post()'s exchange).
    wake_pending_.store(false, std::memory_order_seq_cst);
    if (posted_.maybe_nonempty() || stop_requested_.load(std::memory_order_seq_cst)) {
      may_block = false;
    }
  }
  ring_->submit_and_wait(may_block ? 1 : 0);
  wake_pending_.store(true, std::memory_order_relaxed);
  ring_->drain(
      [this](IoContext* context, int32_t res, uint32_t flags) {
        if (context == nullptr) return;  // linked timeouts, cancels, fire-and-forget closes
        if (auto next = context->on_cqe(*context, res, flags)) ready_.push_back(next);
      },
      options_.cqe_batch);
  dispatch_messages();
  resume_ready();
}

void EventLoop::resume_ready() {
  // Resume after the CQ walk: a coroutine may prepare SQEs, finish, or free its context.
  // Hooks run once nothing is ready, so they see all this iteration's work; they may make
  // coroutines ready again (a writer whose send could not start).
  while (!ready_.empty() || hooks_head_ != nullptr) {
    while (!ready_.empty()) {
      resuming_.swap(ready_);
      for (auto coroutine : resuming_) coroutine.resume();
      resuming_.clear();
    }
    run_pre_submit_hooks();
  }
}

void EventLoop::run_before_submit(io::PreSubmitHook& hook) noexcept {
  if (hook.linked) return;
  hook.prev = hooks_tail_;
  hook.next = nullptr;
  if (hooks_tail_) {
    hooks_tail_->next = &hook;
  } else {
    hooks_head_ = &hook;
  }
  hooks_tail_ = &hook;
  hook.linked = true;
}

void EventLoop::cancel_before_submit(io::PreSubmitHook& hook) noexcept {
  if (!hook.linked) return;
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
  hook.linked = false;
}

void EventLoop::run_pre_submit_hooks() noexcept {
  // One at a time from the head: a hook may add or cancel others while it runs.
  while (hooks_head_ != nullptr) {
    io::PreSubmitHook& hook = *hooks_head_;
    cancel_before_submit(hook);
    hook.run(hook);
  }
}

void EventLoop::run_posted() {
  while (auto task = posted_.pop()) (*task)();
}

void EventLoop::shutdown_io() noexcept {
  if (io_shut_down_) return;
  io_shut_down_ = true;  // from here, new operations complete at once with ECANCELED
  // Refuse new messages, but wait for those already reserved: with DEFER_TASKRUN only this
  // thread can reap them, and a message left behind is a value (an fd) lost for good.
  mailbox_.fetch_and(~kMailboxOpen, std::memory_order_acq_rel);
  // Run what was posted before stop (a hand-off must still close its fd), then cancel
  // every operation in flight and reap until the kernel holds nothing of ours
  // (IO_URING_PITFALLS #17: never free a buffer or frame under an in-flight SQE).
  run_posted();
  for (int round = 0; round < 1000 && (ring_->in_flight() > 0 || messages_on_their_way() > 0);
       ++round) {
    io_uring_sqe* sqe;
    if (round % 50 == 0 && ring_->acquire(&sqe, 1)) {
      io_uring_prep_cancel(sqe, nullptr, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
      io_uring_sqe_set_data(sqe, nullptr);
    }
    ring_->submit_and_wait(1, /*timeout_ms=*/10);
    ring_->drain([this](IoContext* context, int32_t res, uint32_t flags) {
      if (context == nullptr) return;
      if (auto next = context->on_cqe(*context, res, flags)) ready_.push_back(next);
    });
    dispatch_messages();
    resume_ready();
    run_posted();
  }
  if (ring_->in_flight() > 0) {
    LOG_ERROR("event loop stopped with {} operations still in flight", ring_->in_flight());
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

namespace ucp {

namespace io {
uint64_t coarse_now_ms() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000 + static_cast<uint64_t>(now.tv_nsec) / 1000000;
}
}  // namespace io

void EventLoop::add_deadline(io::DeadlineNode& node, uint32_t timeout_ms) noexcept {
  if (node.linked) remove_deadline(node);
  node.due_ms = io::coarse_now_ms() + timeout_ms;
  node.prev = deadlines_tail_;
  node.next = nullptr;
  if (deadlines_tail_) {
    deadlines_tail_->next = &node;
  } else {
    deadlines_head_ = &node;
  }
  deadlines_tail_ = &node;
  node.linked = true;
  uint32_t wanted_tick = std::max<uint32_t>(timeout_ms / 4, 5);
  if (tick_ms_ == 0 || wanted_tick < tick_ms_) tick_ms_ = wanted_tick;
  arm_deadline_tick();
}

void EventLoop::remove_deadline(io::DeadlineNode& node) noexcept {
  if (!node.linked) return;
  if (node.prev) {
    node.prev->next = node.next;
  } else {
    deadlines_head_ = node.next;
  }
  if (node.next) {
    node.next->prev = node.prev;
  } else {
    deadlines_tail_ = node.prev;
  }
  node.prev = node.next = nullptr;
  node.linked = false;
}

void EventLoop::arm_deadline_tick() {
  if (tick_armed_ || io_shut_down_ || deadlines_head_ == nullptr) return;
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) return;  // retried when the next deadline is added
  tick_interval_ = io::KernelTimespec::from_ms(tick_ms_);
  io_uring_prep_timeout(sqe, reinterpret_cast<__kernel_timespec*>(&tick_interval_), 0, 0);
  tick_context_.loop = this;
  tick_context_.on_cqe = &on_deadline_tick;
  io_uring_sqe_set_data(sqe, &tick_context_);
  tick_armed_ = true;
}

std::coroutine_handle<> EventLoop::on_deadline_tick(IoContext& context, int32_t,
                                                    uint32_t) noexcept {
  EventLoop* loop = static_cast<TickContext&>(context).loop;
  loop->tick_armed_ = false;
  loop->sweep_deadlines();
  loop->arm_deadline_tick();
  return {};
}

void EventLoop::sweep_deadlines() noexcept {
  uint64_t now = io::coarse_now_ms();
  // Detach the due nodes first: firing one may add or remove others.
  io::DeadlineNode* due = nullptr;
  for (io::DeadlineNode* node = deadlines_head_; node != nullptr;) {
    io::DeadlineNode* next = node->next;
    if (node->due_ms <= now) {
      remove_deadline(*node);
      node->next = due;
      due = node;
    }
    node = next;
  }
  while (due != nullptr) {
    io::DeadlineNode* next = due->next;
    due->next = nullptr;
    due->fire(*due);  // schedules, never resumes inline: nothing is freed under us
    due = next;
  }
}

}  // namespace ucp
