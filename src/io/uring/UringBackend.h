#pragma once
// UringBackend: the io_uring backend of an EventLoop. Every operation descriptor becomes one
// SQE whose user_data is the descriptor (two, linked, for an operation with a deadline), every
// CQE a completion; the loop's whole iteration goes to the kernel in one io_uring_enter.
//
// Optional strategies, each switched by a LoopOptions key and measured (docs/benchmarks.md):
// a provided-buffer ring for multishot receives (BufferRing), registered buffers for
// single-shot reads and the sends from them (FixedBuffers), ring-to-ring messages (MSG_RING).
//
// Thread contract: the owning loop's thread only (created anywhere).

#include <memory>
#include <string>

#include "../Backend.h"
#include "BufferRing.h"
#include "FixedBuffers.h"
#include "IoUring.h"
#include "SpliceSender.h"

namespace ucp::detail {

/// The two completion contexts of a deadline (bases of UringDeadline, told apart by type).
struct OperationPart : IoContext {};  // the operation's own completion, held until the timer's
struct TimerPart : IoContext {};      // the timer's

/// An operation's deadline on this backend, in its LinkedTimeout's storage: the operation's
/// SQE and a linked IORING_OP_LINK_TIMEOUT, each with a completion context of its own, so
/// the operation completes once both CQEs are in, in whichever order they come. It lives apart
/// from the operation, so it keeps a pointer to it.
struct UringDeadline : OperationPart, TimerPart {
  UringDeadline() noexcept {
    OperationPart::on_complete = hook<&UringDeadline::operation_done, OperationPart>;
    TimerPart::on_complete = hook<&UringDeadline::timer_done, TimerPart>;
  }
  std::coroutine_handle<> operation_done(int32_t res, uint32_t completion) noexcept;
  std::coroutine_handle<> timer_done(int32_t res, uint32_t completion) noexcept;
  /// Both CQEs are in: the operation completes.
  std::coroutine_handle<> both_done() noexcept;

  Operation* operation = nullptr;
  __kernel_timespec spec;  // read by the kernel when the SQE is submitted
  uint8_t remaining = 0;   // CQEs still to come
};

class UringBackend final : public Backend {
 public:
  /// `share_with` may be another io_uring loop: with SQPOLL, the rings share its poller.
  static Result<std::unique_ptr<UringBackend>> create(EventLoop& owner, const LoopOptions& options,
                                                      const EventLoop* share_with,
                                                      std::string& warnings);
  ~UringBackend() override;

  Result<void> enable() override { return ring_->enable(); }
  bool submit(Operation& op) noexcept override;
  void cancel(Operation& op) noexcept override;
  void poll(bool block, std::chrono::nanoseconds timeout, ReadyList& ready,
            uint32_t limit) override;
  void cancel_all() noexcept override;
  uint64_t in_flight() const noexcept override { return ring_->in_flight(); }

  ReceiveBuffers* receive_buffers() noexcept override { return buffer_ring_.get(); }
  BufferLease borrow_registered_buffer() noexcept override;
  void release_registered_buffer(uint16_t index) noexcept override;

  BackendKind kind() const noexcept override { return BackendKind::kIoUring; }
  const char* name() const noexcept override { return "io_uring"; }
  std::string describe() const override;

  int ring_fd() const noexcept { return ring_->ring_fd(); }
  const UringFeatures& features() const noexcept { return ring_->features(); }

 private:
  struct MessageContext : IoContext {
    EventLoop* loop = nullptr;
  };
  explicit UringBackend(EventLoop& owner) noexcept : owner_(owner) {}
  void prepare(io_uring_sqe* sqe, Operation& op) noexcept;
  bool submit_with_timeout(Operation& op) noexcept;
  uint32_t restart_datagrams(Operation& op, uint32_t flags) noexcept;
  static std::coroutine_handle<> on_message(IoContext& context, int32_t res,
                                            uint32_t flags) noexcept;

  EventLoop& owner_;
  std::unique_ptr<IoUring> ring_;
  // Destroyed before the ring: their registrations go first.
  std::unique_ptr<BufferRing> buffer_ring_;
  std::unique_ptr<FixedBuffers> fixed_buffers_;
  std::unique_ptr<SpliceSender> splice_;  // kSendFile, created with the first one
  MessageContext message_context_;        // never submitted here: its CQEs come from other rings
};

}  // namespace ucp::detail
