#pragma once
// EventLoop: one thread's proactor. Coroutines describe operations (io/detail/Operation.h) through
// the awaiters of io/Operations.h; the loop's backend performs them and reports completions.
// Each iteration is:
//
//   run posted tasks -> start every operation prepared in this iteration in ONE batch (one
//   io_uring_enter, or the epoll attempts and one epoll_wait), waiting if there is nothing to
//   do, at most until the next timer -> deliver the completions -> fire due timers -> resume
//   the coroutines they made ready -> run the pre-submit hooks that work queued
//
// Backends (LoopOptions::backend): io_uring, the fast path, and epoll, a readiness loop that
// completes the same operations where io_uring is unavailable (seccomp, sysctl, old kernel).
// Nothing above io/ knows which one runs: operations, completions, receive buffers, leases
// and timers look the same on both.
//
// Other threads reach the loop only through `post` (the project's lock-free queue plus an
// eventfd wake-up, coalesced) and `stop`.
//
// Ownership: the loop owns the coroutines started with `spawn`. When `run` returns it has
// cancelled every in-flight operation and reaped every completion, so no buffer or frame is
// freed under the kernel; frames still suspended on something else are destroyed with it.

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/MpscQueue.h"
#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/Timer.h"
#include "ucp/io/detail/IoContext.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/io/detail/TimerQueue.h"

namespace ucp {

namespace detail {
class Backend;
class ReceiveBuffers;
struct LoopAccess;
struct PreSubmitHook;
}  // namespace detail

enum class BackendKind : uint8_t {
  kAuto,     // io_uring, or epoll where io_uring cannot be used (one WARN says why)
  kIoUring,  // io_uring or fail
  kEpoll,
};

/// Loop set-up knobs (the [event_loop] config section maps onto these).
struct LoopOptions {
  BackendKind backend = BackendKind::kAuto;
  uint32_t ring_entries = defaults::kRingEntries;  // io_uring SQ size; the CQ gets 4x
  bool sqpoll = defaults::kSqpoll;                 // io_uring: IORING_SETUP_SQPOLL
  uint32_t sqpoll_idle_ms = defaults::kSqpollIdleMs;
  // The CPU the SQPOLL thread runs on (IORING_SETUP_SQ_AFF); -1 = not pinned. With sqpoll only.
  int32_t sqpoll_cpu = defaults::kSqpollCpu;
  // Before sleeping, look for completions (and posted tasks) for this long; 0 = sleep at once.
  // Where the kernel offers it, it also busy-polls the network devices' queues for as long
  // (io_uring IORING_REGISTER_NAPI, epoll EPIOCSPARAMS): LoopCapabilities::napi_busy_poll.
  uint32_t busy_poll_us = defaults::kBusyPollUs;
  // Operations waiting while the SQ is full.
  uint32_t pending_queue_capacity = defaults::kPendingQueueCapacity;
  bool defer_taskrun = defaults::kDeferTaskrun;  // io_uring: SINGLE_ISSUER + DEFER_TASKRUN
  // Receive buffers for multishot receive; 0 = none (the server binaries use
  // defaults::kProvidedBuffersCount).
  uint32_t provided_buffers_count = 0;
  uint32_t provided_buffer_size = defaults::kProvidedBufferSize;
  // io_uring fixed buffers (READ/WRITE_FIXED); 0 = none.
  uint32_t registered_buffers_count = defaults::kRegisteredBuffersCount;
  uint32_t registered_buffer_size = defaults::kRegisteredBufferSize;
  // Completions handled per iteration; 0 = all that are ready.
  uint32_t cqe_batch = defaults::kCqeBatch;
};

/// What the running backend can do (probed at start, not guessed from a kernel version).
struct LoopCapabilities {
  bool multishot_accept = false;   // one accept operation serves many connections
  bool multishot_receive = false;  // receive() is served from the loop's receive buffers
  bool ring_messages = false;      // io/detail/RingMessage.h (io_uring MSG_RING)
  bool registered_buffers = false;
  bool napi_busy_poll = false;  // busy_poll_us also reaches the kernel's NAPI busy poll
};

struct LoopStats {
  uint64_t submit_calls = 0;          // io_uring_enter / epoll_wait calls
  uint64_t operations_submitted = 0;  // operations handed to the kernel
  uint64_t completion_overflows = 0;  // times completions had to wait in the kernel's overflow list
  uint64_t deferred_submissions = 0;  // operations that waited in the pending queue (SQ full)
  uint64_t rejected_submissions = 0;  // operations refused: the pending queue was full too
  uint64_t busy_retries = 0;          // submits the kernel refused until completions were reaped
  uint64_t busy_polls = 0;      // times the loop spun (busy_poll_us) instead of sleeping at once
  uint64_t busy_poll_hits = 0;  // of those, spins that found work: the loop did not sleep
};

class EventLoop {
 public:
  /// Sets up the backend. The error's message() is raw; describe_setup_error() explains it.
  /// `warnings` receives one line per optional feature that was asked for but not given.
  /// With `share_with`, the loop shares that loop's kernel-side workers where the backend can
  /// (io_uring SQPOLL: one poller thread for all rings).
  static Result<std::unique_ptr<EventLoop>> create(const LoopOptions& options,
                                                   std::string* warnings = nullptr,
                                                   const EventLoop* share_with = nullptr);
  /// One line that says what a create() failure means (seccomp, sysctl, memlock...).
  static std::string describe_setup_error(std::error_code error, const LoopOptions& options);

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop();

  /// Runs on the calling thread until stop(); then cancels and reaps everything in flight.
  void run();
  /// Any thread. The loop finishes its current iteration, then shuts down as run() says.
  void stop() noexcept;
  /// Any thread. Runs `task` on the loop thread, in posting order per posting thread.
  void post(UniqueFunction<void()> task);
  /// Loop thread. Starts `task` now; the loop owns it until it finishes.
  void spawn(Task<> task) { spawned_.spawn(std::move(task)); }
  /// Loop thread. The same for a Spawned coroutine (no wrapper frame).
  void spawn(Spawned spawned) { spawned_.spawn(std::move(spawned)); }
  /// Loop thread. Resumes `handle` in this iteration (after the completions are delivered).
  void schedule(std::coroutine_handle<> handle) { ready_.push_back(handle); }

  // ---- timers ----
  void add_timer(TimerNode& node, Clock::time_point due) { timers_.add(node, due); }
  void cancel_timer(TimerNode& node) noexcept { timers_.cancel(node); }
  /// The time this iteration started waiting for completions ended: cheap, a little behind.
  Clock::time_point now() const noexcept { return now_; }
  size_t armed_timers() const noexcept { return timers_.armed(); }

  // ---- state ----
  bool in_loop_thread() const noexcept;
  /// True once run() is tearing down: new operations are refused with ECANCELED.
  bool io_closed() const noexcept { return io_shut_down_; }
  bool stopping() const noexcept { return stop_requested_.load(std::memory_order_relaxed); }
  BackendKind backend_kind() const noexcept;
  const char* backend_name() const noexcept;
  const LoopCapabilities& capabilities() const noexcept;
  /// One line naming the backend and what it runs with ("io_uring: single_issuer=on ...").
  std::string describe() const;
  const LoopStats& stats() const noexcept;
  const LoopOptions& options() const noexcept { return options_; }
  size_t spawned_count() const noexcept { return spawned_.size(); }
  /// Operations whose last completion has not arrived.
  uint64_t in_flight() const noexcept;
  uint64_t wakeups_written() const noexcept {
    return wakeups_written_.load(std::memory_order_relaxed);
  }

 private:
  // The library's own layers reach what follows through detail::LoopAccess
  // (io/detail/LoopAccess.h), which documents each: programs never call them.
  friend struct detail::LoopAccess;
  bool submit(detail::Operation& op) noexcept;
  bool try_now(detail::Operation& op) noexcept;
  void cancel(detail::Operation& op) noexcept;
  void attach(int fd) noexcept;
  void detach(int fd) noexcept;
  detail::ReceiveBuffers* receive_buffers() noexcept;
  BufferLease borrow_receive_buffer();
  void set_message_handler(UniqueFunction<void(int32_t)> handler);
  bool reserve_incoming_message() noexcept;
  void release_incoming_message() noexcept;
  void message_arrived(int32_t value) { arrived_messages_.push_back(value); }
  void run_before_submit(detail::PreSubmitHook& hook) noexcept;
  void cancel_before_submit(detail::PreSubmitHook& hook) noexcept;
  detail::Backend& backend() noexcept { return *backend_; }

  explicit EventLoop(const LoopOptions& options);
  void run_once();
  void run_posted();
  void resume_ready();
  void run_pre_submit_hooks() noexcept;
  bool hook_linked(const detail::PreSubmitHook& hook) const noexcept;
  void arm_wakeup() noexcept;
  void shutdown_io() noexcept;
  void poll(bool may_block);
  bool busy_poll() noexcept;
  static std::coroutine_handle<> on_wakeup(detail::IoContext& context, int32_t res,
                                           uint32_t flags) noexcept;
  void open_mailbox() noexcept;
  void dispatch_messages();
  uint64_t messages_on_their_way() const noexcept;

  LoopOptions options_;
  std::unique_ptr<detail::Backend> backend_;
  UniqueFd wake_fd_;  // blocking on purpose: io_uring then waits on it instead of EAGAIN
  struct WakeOperation : detail::Operation {
    EventLoop* loop = nullptr;
  };
  WakeOperation wake_op_;
  uint64_t wake_value_ = 0;
  bool wake_armed_ = false;
  MpscQueue<UniqueFunction<void()>> posted_;
  // true while the loop is awake or a wake-up is on its way: posters then skip the write.
  alignas(64) std::atomic<bool> wake_pending_{true};
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> wakeups_written_{0};
  std::atomic<std::thread::id> thread_id_{};
  // Mailbox for ring messages: kMailboxOpen | number of messages reserved by senders and
  // not yet handled here. One word, so that "open?" and "count one more" are a single RMW.
  static constexpr uint64_t kMailboxOpen = uint64_t{1} << 63;
  alignas(64) std::atomic<uint64_t> mailbox_{0};
  UniqueFunction<void(int32_t)> message_handler_;
  std::vector<int32_t> arrived_messages_;  // this iteration's, handled after the completions
  std::vector<int32_t> handling_messages_;
  detail::TimerQueue timers_;
  Clock::time_point now_ = Clock::now();
  detail::PreSubmitHook* hooks_head_ = nullptr;
  detail::PreSubmitHook* hooks_tail_ = nullptr;
  std::vector<std::coroutine_handle<>> ready_;
  std::vector<std::coroutine_handle<>> resuming_;
  SpawnGroup spawned_;
  bool io_shut_down_ = false;
  bool enabled_ = false;
};

}  // namespace ucp
