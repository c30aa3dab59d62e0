#include "UringBackend.h"

#include <cerrno>
#include <csignal>
#include <new>

#include <fcntl.h>
#include <sys/socket.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/DatagramLayout.h"
#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

// The datagram layout of io/detail/DatagramLayout.h is the kernel's: a multishot recvmsg's buffer
// is handed up unchanged.
static_assert(sizeof(DatagramHeader) == sizeof(io_uring_recvmsg_out));
static_assert(offsetof(DatagramHeader, name_length) == offsetof(io_uring_recvmsg_out, namelen));
static_assert(offsetof(DatagramHeader, control_length) ==
              offsetof(io_uring_recvmsg_out, controllen));
static_assert(offsetof(DatagramHeader, payload_length) ==
              offsetof(io_uring_recvmsg_out, payloadlen));
static_assert(offsetof(DatagramHeader, flags) == offsetof(io_uring_recvmsg_out, flags));
static_assert(kFsyncDataOnly == IORING_FSYNC_DATASYNC);

namespace {

// A multishot recvmsg's user_data carries this bit: its completions pass through
// restart_datagrams() before they are delivered (see there).
constexpr uintptr_t kDatagramTag = 1;
static_assert(alignof(Operation) > kDatagramTag);
// Operation::backend_state on this backend: a cancel was asked for (multishot recvmsg only),
// or the operation is in flight with a linked deadline (its SQE's user_data is the deadline's
// operation part, which a cancel must name).
constexpr uint16_t kCancelRequested = 1;
constexpr uint16_t kLinkedDeadline = 2;

static_assert(sizeof(UringDeadline) <= LinkedTimeout::kStorageBytes);

uint64_t datagram_user_data(Operation& op) noexcept {
  return reinterpret_cast<uintptr_t>(&op) | kDatagramTag;
}

}  // namespace

Result<std::unique_ptr<UringBackend>> UringBackend::create(EventLoop& owner,
                                                           const LoopOptions& options,
                                                           const EventLoop* share_with,
                                                           std::string& warnings) {
  std::unique_ptr<UringBackend> self(new UringBackend(owner));
  int share_fd = -1;
  if (share_with != nullptr && share_with->backend_kind() == BackendKind::kIoUring) {
    share_fd = static_cast<const UringBackend&>(
                   detail::LoopAccess::backend(*const_cast<EventLoop*>(share_with)))
                   .ring_fd();
  }
  auto ring = IoUring::create(options, share_fd, self->stats_, warnings);
  if (!ring) return Unexpected{ring.error()};
  self->ring_ = std::move(*ring);
  self->message_context_.loop = &owner;
  self->message_context_.on_complete = &on_message;
  self->ring_->set_message_context(&self->message_context_);

  const UringFeatures& features = self->ring_->features();
  if (options.provided_buffers_count > 0) {
    if (!features.multishot_recv) {
      warnings +=
          "multishot_recv: the kernel lacks multishot receive (6.0+); using one recv per "
          "read\n";
    } else if (auto buffers =
                   BufferRing::create(*self->ring_->raw(), options.provided_buffers_count,
                                      options.provided_buffer_size, 0)) {
      self->buffer_ring_ = std::move(*buffers);
    } else if (buffers.error() == SetupError::kReceiveBuffers) {
      return Unexpected{buffers.error()};  // asked-for memory the process cannot have: fatal
    } else {
      warnings += "multishot_recv: cannot register a provided buffer ring (" +
                  buffers.error().message() + "); using one recv per read\n";
    }
  }
  if (options.registered_buffers_count > 0) {
    auto fixed = self->ring_->register_buffers(options.registered_buffers_count,
                                               options.registered_buffer_size);
    if (fixed) {
      self->fixed_buffers_ = std::move(*fixed);
      // WRITE_FIXED on a socket has write(2) semantics: no MSG_NOSIGNAL, so a reset peer
      // would raise SIGPIPE. Ignore it unless the application installed its own handler.
      struct sigaction current {};
      if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
        ::signal(SIGPIPE, SIG_IGN);
      }
    } else {
      warnings += describe_registration_error(fixed.error(), options.registered_buffers_count,
                                              options.registered_buffer_size) +
                  "\n";
    }
  }
  if (options.busy_poll_us > 0) {
    self->capabilities_.napi_busy_poll = self->ring_->register_napi_busy_poll(options.busy_poll_us);
  }
  self->capabilities_.multishot_accept = features.multishot_accept;
  self->capabilities_.multishot_receive = self->buffer_ring_ != nullptr;
  self->capabilities_.ring_messages = features.msg_ring;
  self->capabilities_.registered_buffers = self->fixed_buffers_ != nullptr;
  return self;
}

UringBackend::~UringBackend() = default;

std::string UringBackend::describe() const {
  std::string out = "io_uring: " + ring_->features().describe();
  out += buffer_ring_ ? " receive_buffers=" + std::to_string(buffer_ring_->count()) + "x" +
                            std::to_string(buffer_ring_->buffer_size())
                      : " receive_buffers=off";
  out += fixed_buffers_ ? " registered_buffers=" + std::to_string(fixed_buffers_->count()) + "x" +
                              std::to_string(fixed_buffers_->buffer_size())
                        : " registered_buffers=off";
  return out;
}

void UringBackend::prepare(io_uring_sqe* sqe, Operation& op) noexcept {
  switch (op.code) {
    case OpCode::kRecv:
      if (op.buffer_index >= 0) {
        io_uring_prep_read_fixed(sqe, op.fd, op.data, op.size, 0, op.buffer_index);
      } else {
        io_uring_prep_recv(sqe, op.fd, op.data, op.size, 0);
      }
      break;
    case OpCode::kRecvMultishot:
      io_uring_prep_recv_multishot(sqe, op.fd, nullptr, 0, 0);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = buffer_ring_->group_id();
      break;
    case OpCode::kSend:
      // Bytes inside a registered buffer (an echoed receive() lease) go out with WRITE_FIXED,
      // which has write(2) semantics (create() made SIGPIPE ignored); otherwise MSG_NOSIGNAL:
      // a reset peer gives EPIPE, never SIGPIPE.
      if (int index = fixed_buffers_ ? fixed_buffers_->index_of(op.data, op.size) : -1;
          index >= 0) {
        io_uring_prep_write_fixed(sqe, op.fd, op.data, op.size, 0, index);
      } else {
        io_uring_prep_send(sqe, op.fd, op.data, op.size, MSG_NOSIGNAL);
      }
      break;
    case OpCode::kSendMsg:
      io_uring_prep_sendmsg(sqe, op.fd, static_cast<const msghdr*>(op.data), MSG_NOSIGNAL);
      break;
    case OpCode::kRecvMsg:
      io_uring_prep_recvmsg(sqe, op.fd, static_cast<msghdr*>(op.data), 0);
      break;
    case OpCode::kRecvMsgMultishot:
      io_uring_prep_recvmsg_multishot(sqe, op.fd, static_cast<msghdr*>(op.data), 0);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = buffer_ring_->group_id();
      sqe->user_data = datagram_user_data(op);
      return;
    case OpCode::kRead:
      if (op.buffer_index >= 0) {
        io_uring_prep_read_fixed(sqe, op.fd, op.data, op.size, op.offset, op.buffer_index);
      } else {
        io_uring_prep_read(sqe, op.fd, op.data, op.size, op.offset);
      }
      break;
    case OpCode::kWrite:
      io_uring_prep_write(sqe, op.fd, op.data, op.size, op.offset);
      break;
    case OpCode::kAccept:
      io_uring_prep_accept(sqe, op.fd, static_cast<sockaddr*>(op.data),
                           static_cast<socklen_t*>(op.aux), SOCK_CLOEXEC);
      break;
    case OpCode::kAcceptMultishot:
      io_uring_prep_multishot_accept(sqe, op.fd, nullptr, nullptr, SOCK_CLOEXEC);
      break;
    case OpCode::kConnect:
      io_uring_prep_connect(sqe, op.fd, static_cast<const sockaddr*>(op.data), op.size);
      break;
    case OpCode::kClose:
      io_uring_prep_close(sqe, op.fd);
      break;
    case OpCode::kCancelFd:
      io_uring_prep_cancel_fd(sqe, op.fd, IORING_ASYNC_CANCEL_ALL);
      break;
    case OpCode::kOpenAt:
      io_uring_prep_openat(sqe, op.fd, static_cast<const char*>(op.data), static_cast<int>(op.size),
                           static_cast<mode_t>(op.offset));
      break;
    case OpCode::kFsync:
      io_uring_prep_fsync(sqe, op.fd, op.size & kFsyncDataOnly);
      break;
    case OpCode::kSendFile:  // never prepared here: SpliceSender owns its SQEs
      break;
    case OpCode::kRingMessage: {
      // The target's CQE: user_data = its message context, res = the value. No CQE_SKIP: our
      // own CQE is the only way to learn that the value did not arrive.
      auto& target =
          static_cast<UringBackend&>(detail::LoopAccess::backend(*static_cast<EventLoop*>(op.aux)));
      io_uring_prep_msg_ring(sqe, target.ring_fd(), op.size,
                             reinterpret_cast<uint64_t>(&target.message_context_), 0);
      break;
    }
  }
  io_uring_sqe_set_data(sqe, &op);
}

bool UringBackend::submit(Operation& op) noexcept {
  if ((op.code == OpCode::kRecvMultishot || op.code == OpCode::kRecvMsgMultishot) &&
      buffer_ring_ == nullptr) {
    op.result = -EOPNOTSUPP;
    return false;
  }
  if (op.code == OpCode::kSendFile) {
    if (!splice_) splice_ = std::make_unique<SpliceSender>(*ring_, owner_);
    return splice_->start(op);
  }
  if (op.code == OpCode::kRingMessage &&
      (!ring_->features().msg_ring ||
       static_cast<EventLoop*>(op.aux)->backend_kind() != BackendKind::kIoUring)) {
    op.result = -EOPNOTSUPP;
    return false;
  }
  if (op.timeout != nullptr && op.timeout->ms > 0) return submit_with_timeout(op);
  op.backend_state = 0;
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) {
    op.result = -EAGAIN;
    return false;
  }
  prepare(sqe, op);
  return true;
}

// An operation with a deadline is two linked SQEs: the operation, then an
// IORING_OP_LINK_TIMEOUT. Both CQEs arrive, in either order; the operation completes once
// both are in, so no CQE can reach a dead frame and data that arrives as the timer fires is
// returned, not lost.
bool UringBackend::submit_with_timeout(Operation& op) noexcept {
  // Both SQEs at once: a flush between them would submit the operation without its timer.
  io_uring_sqe* sqes[2];
  if (!ring_->acquire(sqes, 2)) {
    op.result = -EAGAIN;
    return false;
  }
  // Trivially destructible: LinkedTimeout::end stays null.
  auto* t = ::new (static_cast<void*>(op.timeout->storage)) UringDeadline{};
  const uint32_t ms = op.timeout->ms;
  prepare(sqes[0], op);
  sqes[0]->flags |= IOSQE_IO_LINK;
  t->operation_part.operation = &op;
  t->operation_part.on_complete = &on_linked_part;
  io_uring_sqe_set_data(sqes[0], &t->operation_part);
  t->spec.tv_sec = static_cast<int64_t>(ms / 1000);
  t->spec.tv_nsec = static_cast<long long>(ms % 1000) * 1000000LL;
  io_uring_prep_link_timeout(sqes[1], &t->spec, 0);
  t->timer_part.operation = &op;
  t->timer_part.on_complete = &on_linked_part;
  io_uring_sqe_set_data(sqes[1], &t->timer_part);
  t->remaining = 2;
  op.backend_state = kLinkedDeadline;
  return true;
}

std::coroutine_handle<> UringBackend::on_linked_part(IoContext& context, int32_t res,
                                                     uint32_t) noexcept {
  auto& part = static_cast<UringDeadline::Part&>(context);
  Operation& op = *part.operation;
  auto& t = op.timeout->state<UringDeadline>();
  part.result = res;
  if (--t.remaining > 0) return {};
  int32_t combined = t.operation_part.result;
  // The timer fired and cancelled the operation: a timeout, not a cancel.
  if (combined == -ECANCELED && t.timer_part.result == -ETIME) combined = -ETIMEDOUT;
  op.backend_state = 0;  // before the callback, which may submit it again
  return op.on_complete(op, combined, 0);
}

void UringBackend::cancel(Operation& op) noexcept {
  if (op.code == OpCode::kSendFile) {
    if (splice_) splice_->cancel(op);
    return;
  }
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) return;  // out of room: the operation runs its course
  if (op.code == OpCode::kRecvMsgMultishot) {
    op.backend_state = kCancelRequested;  // restart_datagrams() must not start it again
    io_uring_prep_cancel64(sqe, datagram_user_data(op), 0);
    io_uring_sqe_set_data(sqe, nullptr);
    return;
  }
  const IoContext* target = &op;
  if (op.backend_state == kLinkedDeadline)
    target = &op.timeout->state<UringDeadline>().operation_part;
  io_uring_prep_cancel(sqe, const_cast<IoContext*>(target), 0);
  io_uring_sqe_set_data(sqe, nullptr);  // its own CQE tells nothing the target's will not
}

void UringBackend::cancel_all() noexcept {
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) return;
  io_uring_prep_cancel(sqe, nullptr, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
  io_uring_sqe_set_data(sqe, nullptr);
}

void UringBackend::poll(bool block, std::chrono::nanoseconds timeout, ReadyList& ready,
                        uint32_t limit) {
  ring_->submit_and_wait(block ? 1 : 0, timeout);
  ring_->drain(
      [this, &ready](IoContext* context, int32_t res, uint32_t flags) {
        const auto bits = reinterpret_cast<uintptr_t>(context);
        if (bits & kDatagramTag) {
          auto* op = reinterpret_cast<Operation*>(bits & ~kDatagramTag);
          flags = restart_datagrams(*op, flags);
          context = op;
        }
        deliver(context, res, flags, ready);
      },
      limit);
}

// The kernel ends a multishot recvmsg after a 0-byte datagram (and in a few rarer cases, such as
// a full CQ), with a final CQE that still carries a datagram. The operation's contract is to
// end only on an error, a cancel or a dry pool, as on epoll: so such a CQE restarts it here,
// before delivery, and is delivered with kCompletionMore. Not once a cancel was asked for.
uint32_t UringBackend::restart_datagrams(Operation& op, uint32_t flags) noexcept {
  if ((flags & kCompletionMore) || !(flags & kCompletionBuffer)) return flags;
  if (op.backend_state == kCancelRequested || owner_.io_closed()) return flags;
  io_uring_sqe* sqe;
  if (!ring_->acquire(&sqe, 1)) return flags;  // no room: it ends, and its owner starts it again
  prepare(sqe, op);
  return flags | kCompletionMore;
}

std::coroutine_handle<> UringBackend::on_message(IoContext& context, int32_t res,
                                                 uint32_t) noexcept {
  // IORING_OP_MSG_RING: `res` is the sender's value, not a result of ours.
  detail::LoopAccess::message_arrived(*static_cast<MessageContext&>(context).loop, res);
  return {};
}

BufferLease UringBackend::borrow_registered_buffer() noexcept {
  if (!fixed_buffers_) return {};
  auto index = fixed_buffers_->acquire();
  if (!index) return {};
  auto buffer = fixed_buffers_->buffer(*index);
  return BufferLease::from_registered(owner_, *index, buffer.data(),
                                      static_cast<uint32_t>(buffer.size()));
}

void UringBackend::release_registered_buffer(uint16_t index) noexcept {
  fixed_buffers_->release(index);
}

}  // namespace ucp::detail
