#pragma once
// IoUring: the one io_uring of a loop's io_uring backend. Owns set-up with fallbacks and
// feature probing, the bounded pending queue for SQEs that do not fit in the SQ, the batched
// submit, and the CQE drain. Pinned: no copy, no move.
//
// Thread contract: created on any thread, then used only by the loop thread (it enables
// the ring there, so that SINGLE_ISSUER names that thread as the submitter).

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include <liburing.h>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/IoContext.h"

#include "../SetupError.h"
#include "FixedBuffers.h"

namespace ucp::detail {

// The backend passes CQE flags through as completion flags: the layouts must agree.
static_assert(kCompletionBuffer == IORING_CQE_F_BUFFER);
static_assert(kCompletionMore == IORING_CQE_F_MORE);
static_assert(kBufferIdShift == IORING_CQE_BUFFER_SHIFT);

/// What the running kernel gave us (probed at start, not guessed from its version).
struct UringFeatures {
  bool single_issuer = false;
  bool defer_taskrun = false;
  bool coop_taskrun = false;
  bool sqpoll = false;
  int sqpoll_cpu = -1;            // the CPU the SQPOLL thread is pinned to; -1 = none
  bool nodrop = false;            // IORING_FEAT_NODROP: CQ overflow is queued, not lost
  bool ext_arg = false;           // IORING_FEAT_EXT_ARG: waits take a timeout without an SQE
  bool multishot_accept = false;  // 5.19
  bool multishot_recv = false;    // 6.0
  bool cancel_fd = false;         // IORING_ASYNC_CANCEL_FD/ALL, 5.19
  bool msg_ring = false;          // IORING_OP_MSG_RING, 5.18
  bool send_zc = false;           // IORING_OP_SEND_ZC, 6.0
  std::string describe() const;
};

class IoUring {
 public:
  /// `share_with_fd` >= 0: with SQPOLL, attach to that ring's poller thread.
  static Result<std::unique_ptr<IoUring>> create(const LoopOptions& options, int share_with_fd,
                                                 LoopStats& stats, std::string& warnings);
  IoUring(const IoUring&) = delete;
  IoUring& operator=(const IoUring&) = delete;
  ~IoUring();

  /// Registers `count` x `size` bytes of fresh memory as fixed buffers. ENOMEM means the
  /// locked-memory limit (see describe_registration_error).
  Result<std::unique_ptr<FixedBuffers>> register_buffers(uint32_t count, uint32_t size);

  /// Asks the kernel to busy-poll the network devices' queues (NAPI) for `usecs` whenever
  /// this ring waits (IORING_REGISTER_NAPI, 6.9+). False when the kernel lacks it.
  bool register_napi_busy_poll(uint32_t usecs) noexcept;

  /// Must run on the loop thread before the first submit.
  Result<void> enable();

  /// Gives `n` consecutive SQEs (zeroed, user_data unset) in submission order: in the SQ
  /// when it has room and nothing is waiting, else in the pending queue. False when the
  /// pending queue is full too; nothing was taken then.
  bool acquire(io_uring_sqe** out, unsigned n);

  /// Moves pending SQEs into the SQ (linked chains whole), submits everything in one
  /// io_uring_enter, and waits for `wait_nr` completions (0: do not block), at most
  /// `timeout` when it is not negative.
  void submit_and_wait(unsigned wait_nr, std::chrono::nanoseconds timeout);

  /// Walks the available CQEs once (at most `limit`, 0 = all), then hands the slots back
  /// with one cq_advance.
  template <class OnCqe>
  unsigned drain(OnCqe&& on_cqe, unsigned limit = 0) {
    unsigned total = 0;
    for (;;) {
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        // Without IORING_FEAT_EXT_ARG (before 5.11) liburing waits with a timeout SQE of its own.
        if (cqe->user_data == LIBURING_UDATA_TIMEOUT) continue;
        auto* context = static_cast<IoContext*>(io_uring_cqe_get_data(cqe));
        if (!(cqe->flags & IORING_CQE_F_MORE) && context != message_context_) --in_flight_;
        on_cqe(context, cqe->res, cqe->flags);
        if (limit != 0 && total + seen == limit) break;
      }
      io_uring_cq_advance(&ring_, seen);
      total += seen;
      if (limit != 0 && total == limit) return total;  // the rest waits for the next round
      // CQEs the kernel could not post (CQ full) wait in its overflow list: flush them in.
      if (io_uring_cq_has_overflow(&ring_)) {
        ++stats_.completion_overflows;
        io_uring_get_events(&ring_);
        continue;
      }
      if (seen == 0) return total;
    }
  }

  /// CQEs carrying this user_data were sent by other rings (IORING_OP_MSG_RING), never
  /// submitted here: they do not count against in_flight().
  void set_message_context(const IoContext* context) noexcept { message_context_ = context; }

  io_uring* raw() noexcept { return &ring_; }
  const UringFeatures& features() const noexcept { return features_; }
  int ring_fd() const noexcept { return ring_.ring_fd; }
  uint64_t in_flight() const noexcept { return in_flight_; }
  size_t pending() const noexcept { return pending_.size(); }

 private:
  explicit IoUring(LoopStats& stats) noexcept : stats_(stats) {}
  void flush_pending();

  io_uring ring_{};
  bool initialized_ = false;
  UringFeatures features_;
  std::deque<io_uring_sqe> pending_;
  size_t pending_capacity_ = 0;
  uint64_t in_flight_ = 0;  // SQEs handed out whose final CQE has not arrived
  const IoContext* message_context_ = nullptr;
  LoopStats& stats_;
};

/// One line saying why registering fixed buffers failed and what the server does instead.
std::string describe_registration_error(std::error_code error, uint32_t count, uint32_t size);

/// One line saying what a ring set-up failure that is a limit of this process (ENOMEM,
/// EMFILE...) means and what to do about it; BackendSelection explains the others.
std::string describe_setup_error(std::error_code error, const LoopOptions& options);

}  // namespace ucp::detail
