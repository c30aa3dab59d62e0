#include "EpollBackend.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"

#include "../Sigpipe.h"
#include "EpollBusyPoll.h"
#include "EpollState.h"

namespace ucp::detail {

using namespace epoll;  // EpollState.h

EpollBackend::EpollBackend(EventLoop& owner, int epoll_fd) noexcept
    : owner_(owner), epoll_fd_(epoll_fd), events_(kEventsPerWait) {}

EpollBackend::~EpollBackend() = default;

Result<std::unique_ptr<EpollBackend>> EpollBackend::create(EventLoop& owner,
                                                           const LoopOptions& options,
                                                           std::string& warnings) {
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Unexpected{error_from_errno(errno)};
  std::unique_ptr<EpollBackend> self(new EpollBackend(owner, epoll_fd));
  if (options.provided_buffers_count > 0) {
    if (auto buffers =
            BufferStack::create(options.provided_buffers_count, options.provided_buffer_size)) {
      self->buffers_ = std::move(*buffers);
    } else {
      // Asked-for memory the process cannot have: fatal, as on io_uring (the start-up line
      // names the key to lower).
      return Unexpected{buffers.error()};
    }
  }
  if (options.sqpoll) {
    warnings += "sqpoll: io_uring only (epoll has no submission queue to poll); ignored\n";
  }
  if (options.registered_buffers_count > 0) {
    warnings +=
        "registered_buffers_count: io_uring only (READ_FIXED/WRITE_FIXED); the epoll backend "
        "reads into pool blocks; ignored\n";
  }
  if (options.busy_poll_us > 0) {
    self->capabilities_.napi_busy_poll = set_epoll_busy_poll(epoll_fd, options.busy_poll_us);
  }
  self->capabilities_.multishot_accept = true;
  self->capabilities_.multishot_receive = self->buffers_ != nullptr;
  self->capabilities_.ring_messages = false;
  self->capabilities_.registered_buffers = false;
  return self;
}

std::string EpollBackend::describe() const {
  std::string out = "epoll: edge_triggered=on";
  out += buffers_ ? " receive_buffers=" + std::to_string(buffers_->count()) + "x" +
                        std::to_string(buffers_->buffer_size())
                  : " receive_buffers=off";
  out += " file_workers=" + std::to_string(workers_.thread_count());
  return out;
}

EpollBackend::FdState& EpollBackend::state_of(int fd) {
  const auto index = static_cast<size_t>(fd);
  if (index >= fds_.size()) fds_.resize(std::max(index + 1, fds_.size() * 2));
  return fds_[index];
}

// ---- submission ----

bool EpollBackend::submit(Operation& op) noexcept {
  if (op.code == OpCode::kRingMessage ||
      ((op.code == OpCode::kRecvMultishot || op.code == OpCode::kRecvMsgMultishot) && !buffers_)) {
    op.result = -EOPNOTSUPP;
    return false;
  }
  if (op.code == OpCode::kSendFile) ignore_default_sigpipe();  // sendfile(2) has no MSG_NOSIGNAL
  op.backend_state = kQueued;
  op.next = nullptr;
  op.prev = submitted_tail_;
  if (submitted_tail_) {
    submitted_tail_->next = &op;
  } else {
    submitted_head_ = &op;
  }
  submitted_tail_ = &op;
  ++in_flight_;
  return true;
}

// What poll() would do first thing for this send, done before the coroutines of this
// iteration finish instead: the completion needs no trip through the next poll. Only when the
// order of starts cannot change: nothing is queued before it, and nothing waits to write on
// its socket.
bool EpollBackend::try_now(Operation& op) noexcept {
  if ((op.code != OpCode::kSend && op.code != OpCode::kSendMsg) || submitted_head_ != nullptr ||
      op.fd < 0 || static_cast<size_t>(op.fd) >= fds_.size()) {
    return false;
  }
  FdState& s = fds_[static_cast<size_t>(op.fd)];
  if (!s.attached || !s.writable || !s.writers.empty() || !is_stream(op.fd, s)) return false;
  size_t wanted = op.size;
  ssize_t n;
  do {
    if (op.code == OpCode::kSend) {
      n = ::send(op.fd, op.data, op.size, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else {
      wanted = total_length(*static_cast<const msghdr*>(op.data));
      n = ::sendmsg(op.fd, static_cast<const msghdr*>(op.data), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  } while (n < 0 && errno == EINTR);
  if (n < 0 && would_block(errno)) {
    s.writable = false;  // submit() parks it until the socket has room
    return false;
  }
  ++stats_.operations_submitted;
  if (n < 0) {
    op.result = -errno;
    return true;
  }
  if (static_cast<size_t>(n) < wanted) s.writable = false;  // full: the next edge says when
  op.result = static_cast<int32_t>(n);
  return true;
}

void EpollBackend::start_submitted() noexcept {
  // Ready work a spent budget left behind is older than anything submitted since.
  if (!revisit_.empty()) {
    revisiting_.swap(revisit_);
    for (int fd : revisiting_) {
      FdState& s = fds_[static_cast<size_t>(fd)];
      s.revisit = false;
      run_waiters(fd, s);
    }
    revisiting_.clear();
  }
  while (Operation* op = take_submitted()) {
    // Datagrams queued back to back on one socket (UdpSocket::send_batch) go out in one
    // sendmmsg.
    if (op->code == OpCode::kSendMsg && submitted_head_ != nullptr &&
        submitted_head_->code == OpCode::kSendMsg && submitted_head_->fd == op->fd) {
      send_batch_.clear();
      send_batch_.push_back(op);
      while (send_batch_.size() < kSendBatch && submitted_head_ != nullptr &&
             submitted_head_->code == OpCode::kSendMsg && submitted_head_->fd == op->fd) {
        send_batch_.push_back(take_submitted());
      }
      start_send_batch();
      continue;
    }
    start(*op);
  }
}

Operation* EpollBackend::take_submitted() noexcept {
  Operation* op = submitted_head_;
  if (op == nullptr) return nullptr;
  submitted_head_ = op->next;
  if (submitted_head_) {
    submitted_head_->prev = nullptr;
  } else {
    submitted_tail_ = nullptr;
  }
  op->next = op->prev = nullptr;
  ++stats_.operations_submitted;
  return op;
}

void EpollBackend::start(Operation& op) noexcept {
  switch (op.code) {
    case OpCode::kClose:
      close_fd(op);
      return;
    case OpCode::kCancelFd:
      cancel_fd(op);
      return;
    case OpCode::kOpenAt:
    case OpCode::kFsync:
      start_file_call(op);
      return;
    case OpCode::kRingMessage:  // refused in submit()
      complete(op, -EOPNOTSUPP);
      return;
    default:
      start_io(op);
  }
}

void EpollBackend::start_io(Operation& op) noexcept {
  if (op.fd < 0) {
    complete(op, -EBADF);
    return;
  }
  FdState& s = state_of(op.fd);
  if ((op.code == OpCode::kRead || op.code == OpCode::kWrite) && !s.attached) {
    struct stat status {};
    if (::fstat(op.fd, &status) != 0) {
      complete(op, -errno);
      return;
    }
    if (S_ISREG(status.st_mode) || S_ISBLK(status.st_mode) || S_ISDIR(status.st_mode)) {
      start_file(op);
      return;
    }
  }
  const Direction d = direction_of(op.code);
  WaitList& list = list_of(s, d);
  if (!list.empty()) {  // behind the operations already waiting: FIFO per direction
    park(op, s, d);
    return;
  }
  // Nothing is known about an fd that is not attached: one try tells.
  if (!s.attached) (d == Direction::kRead ? s.readable : s.writable) = true;
  if (d == Direction::kRead ? s.readable : s.writable) {
    switch (perform(op, s)) {
      case Outcome::kCompleted:
        settle(op.fd, s);
        return;
      case Outcome::kBudgetSpent:
        park(op, s, d);
        if (!s.revisit) {
          s.revisit = true;
          revisit_.push_back(op.fd);
        }
        return;
      case Outcome::kBlocked:
        break;
    }
  }
  park(op, s, d);
  settle(op.fd, s);
}

void EpollBackend::close_fd(Operation& op) noexcept {
  const int fd = op.fd;
  if (fd >= 0 && static_cast<size_t>(fd) < fds_.size()) {
    FdState& s = fds_[static_cast<size_t>(fd)];
    // Nothing can wake them once the fd is gone (io_uring would leave them on the file).
    cancel_parked(s, -ECANCELED);
    forget(s);
    s.in_set = false;  // closing drops the registration (unless the file lives on elsewhere)
  }
  complete(op, ::close(fd) == 0 ? 0 : -errno);
}

void EpollBackend::cancel_fd(Operation& op) noexcept {
  const int fd = op.fd;
  int32_t count = 0;
  if (fd >= 0 && static_cast<size_t>(fd) < fds_.size()) {
    FdState& s = fds_[static_cast<size_t>(fd)];
    count += static_cast<int32_t>(cancel_parked(s, -ECANCELED));
    settle(fd, s);
  }
  scratch_.clear();
  workers_.remove_fd(fd, scratch_);
  for (Operation* queued : scratch_) complete(*queued, -ECANCELED);
  count += static_cast<int32_t>(scratch_.size());
  complete(op, count > 0 ? count : -ENOENT);
}

// ---- cancelling ----

void EpollBackend::cancel(Operation& op) noexcept {
  switch (state_of_op(op)) {
    case kQueued:
      if (op.prev) {
        op.prev->next = op.next;
      } else {
        submitted_head_ = op.next;
      }
      if (op.next) {
        op.next->prev = op.prev;
      } else {
        submitted_tail_ = op.prev;
      }
      op.next = op.prev = nullptr;
      complete(op, -ECANCELED);
      break;
    case kParked: {
      FdState& s = fds_[static_cast<size_t>(op.fd)];
      const Direction d = direction_of(op.code);
      const bool was_head = list_of(s, d).head == &op;
      unlink(op, s, d);
      complete(op, -ECANCELED);
      // The next in line may be able to go now (the cancelled one held a spent budget).
      if (was_head && !list_of(s, d).empty() && (d == Direction::kRead ? s.readable : s.writable) &&
          !s.revisit) {
        s.revisit = true;
        revisit_.push_back(op.fd);
      }
      settle(op.fd, s);
      break;
    }
    case kInWorkers:
      if (workers_.remove(op)) complete(op, -ECANCELED);  // a running job is left alone
      break;
    default:
      break;  // not ours, or its final completion is on its way
  }
}

void EpollBackend::cancel_all() noexcept {
  while (submitted_head_ != nullptr) cancel(*submitted_head_);
  for (size_t fd = 0; fd < fds_.size(); ++fd) {
    FdState& s = fds_[fd];
    if (s.readers.empty() && s.writers.empty()) continue;
    cancel_parked(s, -ECANCELED);
    settle(static_cast<int>(fd), s);
  }
  scratch_.clear();
  workers_.remove_all(scratch_);
  for (Operation* queued : scratch_) complete(*queued, -ECANCELED);
}

// ---- completions ----

void EpollBackend::complete(Operation& op, int32_t res, uint32_t flags) noexcept {
  set_state(op, kFinishing);
  // LinkedTimeout::end is set once the deadline exists (the operation parked).
  if (op.timeout != nullptr && op.timeout->end != nullptr) {
    EpollDeadline& deadline = op.timeout->state<EpollDeadline>();
    if (deadline.armed()) owner_.cancel_timer(deadline);
  }
  completions_.push_back({&op, res, flags});
}

void EpollBackend::deliver_completions(ReadyList& ready, uint32_t limit) {
  uint32_t delivered = 0;
  // A callback may cancel or submit: a cancel's completion joins this walk, a submission
  // waits for the next poll.
  while (completions_head_ < completions_.size() && (limit == 0 || delivered < limit)) {
    const Completion c = completions_[completions_head_++];
    ++delivered;
    if (!(c.flags & kCompletionMore)) {
      --in_flight_;
      c.op->backend_state = kIdle;  // before the callback, which may submit it again
    }
    deliver(c.op, c.res, c.flags, ready);
  }
  if (completions_head_ == completions_.size()) {
    completions_.clear();
    completions_head_ = 0;
  }
}

void EpollBackend::poll(bool block, std::chrono::nanoseconds timeout, ReadyList& ready,
                        uint32_t limit) {
  start_submitted();
  // With completions already in hand (sends that went out at once, say) this poll does not
  // look for events: the next one will, and an epoll_wait(0) here finds nothing as often as
  // not, a system call for naught. Never twice in a row, so that a loop whose operations
  // always complete at once still hears its other fds.
  const bool work_pending = completions_head_ < completions_.size() || !revisit_.empty();
  if (work_pending && !skipped_wait_) {
    skipped_wait_ = true;
  } else {
    skipped_wait_ = false;
    int wait_ms = 0;
    if (block && !work_pending) {
      if (timeout.count() < 0) {
        wait_ms = -1;
      } else {
        // Round up: a timer due in 0.3 ms must not turn into a busy loop of 0 ms waits.
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
        wait_ms = static_cast<int>(std::min<int64_t>(ms, INT_MAX));
      }
    }
    const int n =
        ::epoll_wait(epoll_fd_.get(), events_.data(), static_cast<int>(events_.size()), wait_ms);
    ++stats_.submit_calls;
    for (int i = 0; i < n; ++i) on_event(events_[static_cast<size_t>(i)]);
  }
  deliver_completions(ready, limit);
}

}  // namespace ucp::detail
