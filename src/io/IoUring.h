#pragma once
// IoUring: the one io_uring of an EventLoop (private to io/). Owns set-up with fallbacks
// and feature probing, the bounded pending queue for SQEs that do not fit in the SQ, the
// batched submit, and the CQE drain. Pinned: no copy, no move.
//
// Thread contract: created on any thread, then used only by the loop thread (it enables
// the ring there, so that SINGLE_ISSUER names that thread as the submitter).

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include <liburing.h>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/FixedBuffers.h"
#include "ucp/io/IoContext.h"

namespace ucp::io {

/// A loop's own start-up allocation that failed, told apart from the kernel's errors (a ring
/// over RLIMIT_MEMLOCK is ENOMEM too) so that describe_setup_error can name the key to lower.
enum class SetupError : int {
  kProvidedBuffers = 1,  // the provided buffers (or their ring) could not be mapped
};
const std::error_category& setup_error_category() noexcept;
inline std::error_code make_error_code(SetupError error) noexcept {
  return {static_cast<int>(error), setup_error_category()};
}

class IoUring {
 public:
  static Result<std::unique_ptr<IoUring>> create(const LoopOptions& options, std::string& warnings);
  IoUring(const IoUring&) = delete;
  IoUring& operator=(const IoUring&) = delete;
  ~IoUring();

  /// Registers `count` x `size` bytes of fresh memory as fixed buffers. ENOMEM means the
  /// locked-memory limit (see describe_registration_error).
  Result<std::unique_ptr<FixedBuffers>> register_buffers(uint32_t count, uint32_t size);

  /// Must run on the loop thread before the first submit.
  Result<void> enable();

  /// Gives `n` consecutive SQEs (zeroed, user_data unset) in submission order: in the SQ
  /// when it has room and nothing is waiting, else in the pending queue. False when the
  /// pending queue is full too; nothing was taken then.
  bool acquire(io_uring_sqe** out, unsigned n);

  /// Moves pending SQEs into the SQ (linked chains whole), submits everything in one
  /// io_uring_enter, and waits for `wait_nr` completions (0: do not block), at most
  /// `timeout_ms` when it is not negative.
  void submit_and_wait(unsigned wait_nr, int timeout_ms = -1);

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
        ++stats_.cq_overflows;
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
  const IoFeatures& features() const noexcept { return features_; }
  int ring_fd() const noexcept { return ring_.ring_fd; }
  uint64_t in_flight() const noexcept { return in_flight_; }
  size_t pending() const noexcept { return pending_.size(); }
  const IoStats& stats() const noexcept { return stats_; }

 private:
  IoUring() = default;
  void flush_pending();

  io_uring ring_{};
  bool initialized_ = false;
  IoFeatures features_;
  std::deque<io_uring_sqe> pending_;
  size_t pending_capacity_ = 0;
  uint64_t in_flight_ = 0;  // SQEs handed out whose final CQE has not arrived
  const IoContext* message_context_ = nullptr;
  IoStats stats_;
};

/// One line saying why registering fixed buffers failed and what the server does instead.
std::string describe_registration_error(std::error_code error, uint32_t count, uint32_t size);

/// One line saying what a ring set-up failure means and what to do about it.
std::string describe_setup_error(std::error_code error, const LoopOptions& options);

}  // namespace ucp::io

template <>
struct std::is_error_code_enum<ucp::io::SetupError> : std::true_type {};
