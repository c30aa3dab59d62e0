#pragma once
// EventLoop: one thread's proactor. It owns one io_uring; coroutines prepare SQEs through
// the awaiters of io/Operations.h, and each loop iteration is:
//
//   run posted tasks -> submit every SQE of this iteration in ONE io_uring_enter (and wait
//   if there is nothing to do) -> drain all CQEs in a batch -> resume their coroutines ->
//   run the pre-submit hooks that this work queued (see PreSubmitHook)
//
// Other threads reach the loop only through `post` (a lock-free MpscQueue plus an eventfd
// whose read is armed on the ring; wake-ups are coalesced) and `stop`. Another loop can also
// send it a 32-bit value ring to ring (IORING_OP_MSG_RING, io::RingMessage): the kernel posts
// a CQE straight into this ring, and the handler set with `set_message_handler` gets the value.
//
// Ownership: the loop owns the coroutines started with `spawn`. When `run` returns it has
// cancelled every in-flight operation and reaped every CQE, so no buffer or frame is freed
// under the kernel; frames still suspended on something else are destroyed with the loop.
//
// io_uring specifics stay in io/ (the ring wrapper and the awaiters), so a second backend
// can complete the same operations without touching connection or user code.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ucp/base/MpscQueue.h"
#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/Task.h"
#include "ucp/io/Deadlines.h"
#include "ucp/io/IoContext.h"

namespace ucp {

namespace io {
class IoUring;
class BufferRing;
class FixedBuffers;

/// Work a loop runs once just before it submits: after every coroutine that is ready in
/// this iteration has run. A connection gathers all that its handler wrote during the
/// iteration into one send here. The hook lives in its owner, which removes it before dying.
struct PreSubmitHook {
  PreSubmitHook* prev = nullptr;
  PreSubmitHook* next = nullptr;
  void (*run)(PreSubmitHook&) noexcept = nullptr;
  bool linked = false;
};
}  // namespace io

/// Ring set-up knobs (the [event_loop] config section maps onto these).
struct LoopOptions {
  uint32_t ring_entries = 4096;  // SQ size; the CQ gets 4x (at least 2x)
  bool sqpoll = false;           // IORING_SETUP_SQPOLL
  uint32_t sqpoll_idle_ms = 50;
  int attach_wq_fd = -1;                    // share this ring's SQPOLL thread/workers
  uint32_t pending_queue_capacity = 65536;  // SQEs waiting while the SQ is full
  bool defer_taskrun = true;                // SINGLE_ISSUER + DEFER_TASKRUN when available
  uint32_t provided_buffers_count = 0;      // provided buffer ring for multishot recv; 0 = none
  uint32_t provided_buffer_size = 4096;
  uint32_t registered_buffers_count = 0;  // fixed buffers (READ/WRITE_FIXED); 0 = none
  uint32_t registered_buffer_size = 4096;
  uint32_t cqe_batch = 0;  // CQEs handled per iteration; 0 = all that are ready
};

/// What the running kernel gave us (probed at start, not guessed from its version).
struct IoFeatures {
  bool single_issuer = false;
  bool defer_taskrun = false;
  bool coop_taskrun = false;
  bool sqpoll = false;
  bool nodrop = false;            // IORING_FEAT_NODROP: CQ overflow is queued, not lost
  bool multishot_accept = false;  // 5.19
  bool multishot_recv = false;    // 6.0
  bool cancel_fd = false;         // IORING_ASYNC_CANCEL_FD/ALL, 5.19
  bool msg_ring = false;          // IORING_OP_MSG_RING, 5.18
  bool send_zc = false;           // IORING_OP_SEND_ZC, 6.0
  bool provided_buffer_ring = false;
  std::string describe() const;
};

struct IoStats {
  uint64_t submit_calls = 0;  // io_uring_enter calls made to submit and/or wait
  uint64_t sqes_submitted = 0;
  uint64_t cq_overflows = 0;        // times the kernel had to queue CQEs in its overflow list
  uint64_t sq_full_deferrals = 0;   // SQEs that went through the pending queue
  uint64_t pending_rejections = 0;  // operations refused because the pending queue was full
  uint64_t ebusy_retries = 0;
};

class EventLoop {
 public:
  /// Sets up the ring. The error's message() is raw; describe_setup_error() explains it.
  /// `warnings` receives one line per optional feature that was asked for but not given.
  static Result<std::unique_ptr<EventLoop>> create(const LoopOptions& options,
                                                   std::string* warnings = nullptr);
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

  /// Loop thread, or before run(). Receives the values other loops send with io::RingMessage,
  /// on the loop thread after the CQE walk; the loop's mailbox opens once it runs with a
  /// handler. From the start of shutdown the mailbox refuses new messages, but the loop keeps
  /// reaping until every message already on its way has arrived and calls the handler for
  /// each with io_closed() true: it must then release what the value stands for (close an fd).
  /// What the sender did before sending happens-before the handler runs.
  void set_message_handler(UniqueFunction<void(int32_t)> handler);

  bool in_loop_thread() const noexcept;
  /// True once run() is tearing down: new operations then complete with ECANCELED.
  bool io_closed() const noexcept { return io_shut_down_; }
  bool stopping() const noexcept { return stop_requested_.load(std::memory_order_relaxed); }
  const IoFeatures& features() const noexcept;
  const IoStats& stats() const noexcept;
  const LoopOptions& options() const noexcept { return options_; }
  size_t spawned_count() const noexcept { return spawned_.size(); }
  uint64_t in_flight() const noexcept;
  int ring_fd() const noexcept;
  uint64_t wakeups_written() const noexcept {
    return wakeups_written_.load(std::memory_order_relaxed);
  }

  // For awaiters and io/ internals.
  io::IoUring& ring() noexcept { return *ring_; }
  io::BufferRing* buffer_ring() noexcept { return buffer_ring_.get(); }
  /// The registered buffers, or null when off or the kernel refused them.
  io::FixedBuffers* fixed_buffers() noexcept { return fixed_buffers_.get(); }
  /// Queues a resumption for this iteration (awaiters that complete without the kernel).
  void schedule(std::coroutine_handle<> handle) { ready_.push_back(handle); }

  // The receiving side of IORING_OP_MSG_RING, for io::RingMessage. Any thread.
  /// Counts one message on its way to this loop. False when the mailbox is closed (no handler,
  /// not running yet, or shutting down): then nothing may be sent. A true reservation ends
  /// when the message is handled here, or with release_incoming_message.
  bool reserve_incoming_message() noexcept;
  /// The kernel did not deliver a reserved message (the sender's CQE said so).
  void release_incoming_message() noexcept;
  /// The user_data a message's CQE carries into this ring.
  IoContext* message_context() noexcept { return &message_context_; }

  /// Loop thread. Calls node.fire about `timeout_ms` from now (see io/Deadlines.h).
  void add_deadline(io::DeadlineNode& node, uint32_t timeout_ms) noexcept;
  void remove_deadline(io::DeadlineNode& node) noexcept;

  /// Loop thread. Runs hook.run once before the loop next submits; adding a hook that is
  /// already waiting changes nothing.
  void run_before_submit(io::PreSubmitHook& hook) noexcept;
  void cancel_before_submit(io::PreSubmitHook& hook) noexcept;

 private:
  explicit EventLoop(const LoopOptions& options);
  void run_once();
  void run_posted();
  void resume_ready();
  void run_pre_submit_hooks() noexcept;
  void arm_wakeup();
  void shutdown_io() noexcept;
  void arm_deadline_tick();
  void sweep_deadlines() noexcept;
  static std::coroutine_handle<> on_deadline_tick(IoContext& context, int32_t res,
                                                  uint32_t flags) noexcept;
  static std::coroutine_handle<> on_wakeup(IoContext& context, int32_t res,
                                           uint32_t flags) noexcept;
  static std::coroutine_handle<> on_message(IoContext& context, int32_t res,
                                            uint32_t flags) noexcept;
  void open_mailbox() noexcept;
  void dispatch_messages();
  uint64_t messages_on_their_way() const noexcept;

  LoopOptions options_;
  std::unique_ptr<io::IoUring> ring_;
  std::unique_ptr<io::BufferRing> buffer_ring_;
  std::unique_ptr<io::FixedBuffers> fixed_buffers_;  // before ring_ in destruction order
  struct WakeContext : IoContext {
    EventLoop* loop = nullptr;
  };
  UniqueFd wake_fd_;  // blocking on purpose: io_uring then waits on it instead of EAGAIN
  WakeContext wake_context_;
  uint64_t wake_value_ = 0;
  bool wake_armed_ = false;
  MpscQueue<UniqueFunction<void()>> posted_;
  // true while the loop is awake or a wake-up is on its way: posters then skip the write.
  alignas(64) std::atomic<bool> wake_pending_{true};
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> wakeups_written_{0};
  std::atomic<std::thread::id> thread_id_{};
  // Mailbox for IORING_OP_MSG_RING: kMailboxOpen | number of messages reserved by senders and
  // not yet handled here. One word, so that "open?" and "count one more" are a single RMW.
  static constexpr uint64_t kMailboxOpen = uint64_t{1} << 63;
  alignas(64) std::atomic<uint64_t> mailbox_{0};
  struct MessageContext : IoContext {
    EventLoop* loop = nullptr;
  };
  MessageContext message_context_;  // never submitted here: its CQEs come from other rings
  UniqueFunction<void(int32_t)> message_handler_;
  std::vector<int32_t> arrived_messages_;  // this iteration's, handled after the CQE walk
  std::vector<int32_t> handling_messages_;
  struct TickContext : IoContext {
    EventLoop* loop = nullptr;
  };
  io::DeadlineNode* deadlines_head_ = nullptr;
  io::DeadlineNode* deadlines_tail_ = nullptr;
  TickContext tick_context_;
  io::KernelTimespec tick_interval_{};
  uint32_t tick_ms_ = 0;  // sweep interval; 0 until the first deadline
  bool tick_armed_ = false;
  io::PreSubmitHook* hooks_head_ = nullptr;
  io::PreSubmitHook* hooks_tail_ = nullptr;
  std::vector<std::coroutine_handle<>> ready_;
  std::vector<std::coroutine_handle<>> resuming_;
  SpawnGroup spawned_;
  bool io_shut_down_ = false;
  bool enabled_ = false;
};

}  // namespace ucp
