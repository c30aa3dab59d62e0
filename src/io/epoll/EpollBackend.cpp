#include "EpollBackend.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <new>

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/DatagramLayout.h"

#include "../Sigpipe.h"
#include "EpollBusyPoll.h"

namespace ucp::detail {

namespace {

// Operation::backend_state (16 bits): the state in the low byte, flags above it.
enum : uint32_t {
  kIdle = 0,       // not ours (never submitted, or its final completion was delivered)
  kQueued = 1,     // submitted, not started yet
  kParked = 2,     // waiting on its fd
  kInWorkers = 3,  // a file operation handed to FileWorkers
  kFinishing = 4,  // its final completion waits to be delivered
};
constexpr uint32_t kStateMask = 0xFF;
constexpr uint32_t kConnecting = 1u << 8;  // kConnect: connect(2) said EINPROGRESS

constexpr uint32_t kAttachedEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
constexpr uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
constexpr uint32_t kWriteEvents = EPOLLOUT | EPOLLHUP | EPOLLERR;
constexpr uint64_t kWorkersTag = ~uint64_t{0};  // the FileWorkers notifier's events
constexpr int kAcceptBudget = 64;
constexpr size_t kDatagramBatch = 32;  // datagrams per recvmmsg
constexpr size_t kEventsPerWait = 256;

uint32_t state_of_op(const Operation& op) noexcept { return op.backend_state & kStateMask; }
void set_state(Operation& op, uint32_t state) noexcept {
  op.backend_state = static_cast<uint16_t>((op.backend_state & ~kStateMask) | state);
}
uint64_t event_data(int fd, uint32_t generation) noexcept {
  return uint64_t{generation} << 32 | static_cast<uint32_t>(fd);
}
bool would_block(int error) noexcept { return error == EAGAIN || error == EWOULDBLOCK; }

static_assert(sizeof(EpollDeadline) <= LinkedTimeout::kStorageBytes);

// The operation's deadline timer, made in its LinkedTimeout's storage on first use and ended
// with the LinkedTimeout (~TimerNode takes a lazily cancelled timer out of the heap).
EpollDeadline& deadline_of(LinkedTimeout& timeout) noexcept {
  if (timeout.end == nullptr) {
    ::new (static_cast<void*>(timeout.storage)) EpollDeadline();
    timeout.end = [](LinkedTimeout& t) noexcept { std::destroy_at(&t.state<EpollDeadline>()); };
  }
  return timeout.state<EpollDeadline>();
}

// The length of a gathering send: a shorter result means the socket buffer is full.
size_t total_length(const msghdr& message) noexcept {
  size_t total = 0;
  for (size_t i = 0; i < message.msg_iovlen; ++i) total += message.msg_iov[i].iov_len;
  return total;
}

}  // namespace

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

EpollBackend::Direction EpollBackend::direction_of(OpCode code) noexcept {
  switch (code) {
    case OpCode::kRecv:
    case OpCode::kRecvMultishot:
    case OpCode::kRecvMsg:
    case OpCode::kRecvMsgMultishot:
    case OpCode::kRead:
    case OpCode::kAccept:
    case OpCode::kAcceptMultishot:
      return Direction::kRead;
    case OpCode::kSend:
    case OpCode::kSendMsg:
    case OpCode::kWrite:
    case OpCode::kConnect:
    case OpCode::kSendFile:
      return Direction::kWrite;
    case OpCode::kClose:
    case OpCode::kCancelFd:
    case OpCode::kRingMessage:
    case OpCode::kOpenAt:
    case OpCode::kFsync:
      break;
  }
  return Direction::kNone;
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

// Consecutive sendmsg operations on one fd: on a datagram socket that is ready, one sendmmsg
// sends them all (each datagram stays one datagram). What it did not send, and every one of them
// on a stream socket (where a short send in the middle would reorder bytes), starts on its own.
void EpollBackend::start_send_batch() noexcept {
  const int fd = send_batch_.front()->fd;
  size_t sent = 0;
  if (fd >= 0) {
    FdState& s = state_of(fd);
    if (s.writers.empty() && !is_stream(fd, s)) {
      if (!s.attached) s.writable = true;
      if (s.writable) sent = send_datagrams(fd, s);
      if (sent == send_batch_.size()) settle(fd, s);
    }
  }
  for (size_t i = sent; i < send_batch_.size(); ++i) start(*send_batch_[i]);
}

size_t EpollBackend::send_datagrams(int fd, FdState& s) noexcept {
  mmsghdr messages[kSendBatch];
  const size_t count = send_batch_.size();
  for (size_t i = 0; i < count; ++i) {
    messages[i].msg_hdr = *static_cast<const msghdr*>(send_batch_[i]->data);
    messages[i].msg_len = 0;
  }
  int n;
  do {
    n = ::sendmmsg(fd, messages, static_cast<unsigned>(count), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (would_block(errno)) clear_hint(s, Direction::kWrite);
    return 0;  // each one learns its own fate: parked, or its own error
  }
  for (int i = 0; i < n; ++i) {
    complete(*send_batch_[static_cast<size_t>(i)], static_cast<int32_t>(messages[i].msg_len));
  }
  return static_cast<size_t>(n);
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

// Regular files are always "ready" to epoll, so readiness says nothing about the disk. A page
// cache hit completes here at once (RWF_NOWAIT); what would wait goes to the worker threads.
void EpollBackend::start_file(Operation& op) noexcept {
  // O_DIRECT: RWF_NOWAIT only refuses to wait for locks; the read itself would still block the
  // loop until the device answers. Straight to the workers.
  const int status_flags = file_nowait_ ? ::fcntl(op.fd, F_GETFL) : -1;
  if (file_nowait_ && status_flags >= 0 && !(status_flags & O_DIRECT)) {
    iovec vector{op.data, op.size};
    const off_t offset = op.offset == kCurrentPosition ? -1 : static_cast<off_t>(op.offset);
    ssize_t n;
    do {
      n = op.code == OpCode::kRead ? ::preadv2(op.fd, &vector, 1, offset, RWF_NOWAIT)
                                   : ::pwritev2(op.fd, &vector, 1, offset, RWF_NOWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
      complete(op, static_cast<int32_t>(n));
      return;
    }
    // EAGAIN: it would wait; EOPNOTSUPP/EINVAL/ENOSYS: no RWF_NOWAIT here (the workers report
    // a real EINVAL again). Anything else is the answer.
    const int error = errno;
    if (!would_block(error) && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS) {
      complete(op, -error);
      return;
    }
  }
  // The job gets its own reference to the file: closing op.fd meanwhile cannot make it read
  // another file that reused the number.
  const int job_fd = ::fcntl(op.fd, F_DUPFD_CLOEXEC, 0);
  if (job_fd >= 0 && start_file_workers()) {
    set_state(op, kInWorkers);
    if (workers_.push(op, UniqueFd(job_fd))) return;
  } else if (job_fd >= 0) {
    ::close(job_fd);
  }
  // No fd or no thread to spare: better a short wait for the disk than a failed read.
  complete(op, FileWorkers::run(op, op.fd));
}

// openat, fsync, fdatasync: no form of them returns instead of waiting for the disk.
void EpollBackend::start_file_call(Operation& op) noexcept {
  UniqueFd job_fd;
  if (op.fd >= 0) {  // the directory, or the file to sync: the job keeps its own reference
    job_fd = UniqueFd(::fcntl(op.fd, F_DUPFD_CLOEXEC, 0));
    if (!job_fd) {
      complete(op, -errno);
      return;
    }
  }
  if (start_file_workers()) {
    set_state(op, kInWorkers);
    if (workers_.push(op, std::move(job_fd))) return;
  }
  complete(op, FileWorkers::run(op, job_fd ? job_fd.get() : op.fd));
}

bool EpollBackend::start_file_workers() noexcept {
  if (workers_registered_) return true;
  auto notifier = workers_.open_notifier();
  if (!notifier) return false;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLET;
  event.data.u64 = kWorkersTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, *notifier, &event) != 0) return false;
  workers_registered_ = true;
  return true;
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

// ---- the system calls ----

bool EpollBackend::ensure_nonblocking(int fd, FdState& s) noexcept {
  if (s.nonblocking) return true;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  if (!(flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  s.nonblocking = true;  // kept while the fd is attached or waited on
  return true;
}

bool EpollBackend::is_stream(int fd, FdState& s) noexcept {
  if (s.stream < 0) {
    int type = 0;
    socklen_t length = sizeof type;
    const bool ok = ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0;
    s.stream = ok && type == SOCK_STREAM ? 1 : 0;
  }
  return s.stream == 1;
}

// A short transfer on a stream socket means it is drained (or full): the next change brings
// a new edge. Except once the peer has shut down: its FIN (or an error) may be all that is
// left to read, and that edge has been seen already.
bool EpollBackend::drained(int fd, FdState& s, Direction d) noexcept {
  if (!s.attached) return false;  // no hints kept: the one-shot registration is level-triggered
  if (d == Direction::kRead && s.read_closed) return false;
  return is_stream(fd, s);
}

void EpollBackend::clear_hint(FdState& s, Direction d) noexcept {
  (d == Direction::kRead ? s.readable : s.writable) = false;
}

EpollBackend::Outcome EpollBackend::perform(Operation& op, FdState& s) noexcept {
  if (op.code == OpCode::kRecvMultishot) return receive_multishot(op, s);
  if (op.code == OpCode::kAcceptMultishot) return accept_multishot(op, s);
  if (op.code == OpCode::kRecvMsgMultishot) return receive_datagrams(op, s);
  const int fd = op.fd;
  const Direction d = direction_of(op.code);
  const bool needs_nonblocking = op.code == OpCode::kRead || op.code == OpCode::kWrite ||
                                 op.code == OpCode::kAccept || op.code == OpCode::kConnect ||
                                 op.code == OpCode::kSendFile;
  if (needs_nonblocking && !ensure_nonblocking(fd, s)) {
    complete(op, -errno);
    return Outcome::kCompleted;
  }
  size_t wanted = op.size;
  ssize_t n;
  do {
    switch (op.code) {
      case OpCode::kRecv:
        n = ::recv(fd, op.data, op.size, MSG_DONTWAIT);
        break;
      case OpCode::kSend:
        n = ::send(fd, op.data, op.size, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
      case OpCode::kSendMsg:
        wanted = total_length(*static_cast<const msghdr*>(op.data));
        n = ::sendmsg(fd, static_cast<const msghdr*>(op.data), MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
      case OpCode::kRecvMsg:
        wanted = 0;  // a datagram: a short one says nothing about the next
        n = ::recvmsg(fd, static_cast<msghdr*>(op.data), MSG_DONTWAIT);
        break;
      case OpCode::kRead:
        n = op.offset == kCurrentPosition
                ? ::read(fd, op.data, op.size)
                : ::pread(fd, op.data, op.size, static_cast<off_t>(op.offset));
        break;
      case OpCode::kWrite:
        n = op.offset == kCurrentPosition
                ? ::write(fd, op.data, op.size)
                : ::pwrite(fd, op.data, op.size, static_cast<off_t>(op.offset));
        break;
      case OpCode::kAccept:
        wanted = 0;
        n = ::accept4(fd, static_cast<sockaddr*>(op.data), static_cast<socklen_t*>(op.aux),
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
      case OpCode::kConnect:
        wanted = 0;
        n = connect_step(op);
        break;
      case OpCode::kSendFile: {
        // Short at the end of the file as well as on a full socket: the hint stays, and a full
        // socket says so with EAGAIN on the next call.
        wanted = 0;
        auto offset = static_cast<off_t>(op.offset);
        n = ::sendfile(fd, op.source_fd, &offset, op.size);
        break;
      }
      default:
        n = -1;
        errno = EINVAL;
        break;
    }
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int error = errno;
    if (would_block(error)) {
      clear_hint(s, d);
      return Outcome::kBlocked;
    }
    complete(op, -error);
    return Outcome::kCompleted;
  }
  // A stream socket that took or gave less than asked is full or drained: the next change
  // brings a new edge, so the next operation waits for it instead of probing with EAGAIN.
  if (n > 0 && static_cast<size_t>(n) < wanted && drained(fd, s, d)) clear_hint(s, d);
  complete(op, static_cast<int32_t>(n));
  return Outcome::kCompleted;
}

// One step of a non-blocking connect: start it, then (once writable) learn how it ended.
// -1 with errno EAGAIN while it is still under way.
int EpollBackend::connect_step(Operation& op) noexcept {
  const int fd = op.fd;
  if (!(op.backend_state & kConnecting)) {
    if (::connect(fd, static_cast<const sockaddr*>(op.data), op.size) == 0) return 0;
    if (errno != EINPROGRESS) {
      // A Unix socket's EAGAIN (the listener's backlog is full) started nothing: an answer.
      if (would_block(errno)) errno = ECONNREFUSED;
      return -1;
    }
    op.backend_state |= kConnecting;
    errno = EAGAIN;
    return -1;
  }
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return -1;
  if (error != 0) {
    errno = error;
    return -1;
  }
  sockaddr_storage peer{};
  socklen_t peer_length = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) == 0) return 0;
  if (errno == ENOTCONN) errno = EAGAIN;  // a stale hint: still connecting
  return -1;
}

EpollBackend::Outcome EpollBackend::receive_multishot(Operation& op, FdState& s) noexcept {
  const int fd = op.fd;
  const uint32_t size = buffers_->buffer_size();
  for (int i = 0; i < kMultishotBudget; ++i) {
    const int32_t id = buffers_->take();
    if (id < 0) {  // as io_uring: the pool is dry, the receive ends and its owner falls back
      complete(op, -ENOBUFS);
      return Outcome::kCompleted;
    }
    const auto buffer_id = static_cast<uint16_t>(id);
    ssize_t n;
    do {
      n = ::recv(fd, buffers_->buffer(buffer_id), size, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      completions_.push_back(
          {&op, static_cast<int32_t>(n),
           kCompletionMore | kCompletionBuffer | (uint32_t{buffer_id} << kBufferIdShift)});
      if (static_cast<uint32_t>(n) < size && drained(fd, s, Direction::kRead)) {
        s.readable = false;
        return Outcome::kBlocked;
      }
      continue;
    }
    const int error = errno;
    buffers_->put_back(buffer_id);
    if (n == 0) {
      complete(op, 0);
      return Outcome::kCompleted;
    }
    if (would_block(error)) {
      s.readable = false;
      return Outcome::kBlocked;
    }
    complete(op, -error);
    return Outcome::kCompleted;
  }
  return Outcome::kBudgetSpent;
}

// recvmmsg into free receive buffers, each datagram laid out as io/detail/DatagramLayout.h draws
// (the kernel's own layout on io_uring).
EpollBackend::Outcome EpollBackend::receive_datagrams(Operation& op, FdState& s) noexcept {
  const int fd = op.fd;
  const auto& shape = *static_cast<const msghdr*>(op.data);
  const uint32_t name_capacity = shape.msg_namelen;
  const auto control_capacity = static_cast<uint32_t>(shape.msg_controllen);
  const uint64_t headroom = uint64_t{sizeof(DatagramHeader)} + name_capacity + control_capacity;
  const uint32_t size = buffers_->buffer_size();
  if (headroom > size) {  // io_uring's answer when the header does not fit a buffer
    complete(op, -EFAULT);
    return Outcome::kCompleted;
  }
  const auto room = static_cast<size_t>(size - headroom);
  for (int round = 0; round < kMultishotBudget; ++round) {
    const size_t want = std::min(kDatagramBatch, buffers_->free_count());
    if (want == 0) {  // as io_uring: the pool is dry, the receive ends and its owner falls back
      complete(op, -ENOBUFS);
      return Outcome::kCompleted;
    }
    uint16_t ids[kDatagramBatch];
    mmsghdr messages[kDatagramBatch];
    iovec vectors[kDatagramBatch];
    for (size_t i = 0; i < want; ++i) {
      ids[i] = static_cast<uint16_t>(buffers_->take());
      std::byte* buffer = buffers_->buffer(ids[i]);
      vectors[i] = {buffer + headroom, room};
      msghdr& message = messages[i].msg_hdr;
      message = msghdr{};
      message.msg_name = name_capacity > 0 ? buffer + sizeof(DatagramHeader) : nullptr;
      message.msg_namelen = name_capacity;
      message.msg_iov = &vectors[i];
      message.msg_iovlen = 1;
      message.msg_control =
          control_capacity > 0 ? buffer + sizeof(DatagramHeader) + name_capacity : nullptr;
      message.msg_controllen = control_capacity;
      messages[i].msg_len = 0;
    }
    int n;
    do {
      n = ::recvmmsg(fd, messages, static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
    } while (n < 0 && errno == EINTR);
    const size_t received = n > 0 ? static_cast<size_t>(n) : 0;
    const int error = n < 0 ? errno : 0;
    for (size_t i = want; i > received; --i) buffers_->put_back(ids[i - 1]);  // LIFO order kept
    if (n < 0) {
      if (would_block(error)) {
        s.readable = false;
        return Outcome::kBlocked;
      }
      complete(op, -error);
      return Outcome::kCompleted;
    }
    for (size_t i = 0; i < received; ++i) {
      const msghdr& message = messages[i].msg_hdr;
      const DatagramHeader header{message.msg_namelen,
                                  static_cast<uint32_t>(message.msg_controllen),
                                  messages[i].msg_len, static_cast<uint32_t>(message.msg_flags)};
      std::memcpy(buffers_->buffer(ids[i]), &header, sizeof header);
      completions_.push_back(
          {&op, static_cast<int32_t>(headroom + messages[i].msg_len),
           kCompletionMore | kCompletionBuffer | (uint32_t{ids[i]} << kBufferIdShift)});
    }
    // Fewer than asked for: the socket's queue is empty, and the next datagram brings an edge.
    if (received < want) {
      s.readable = false;
      return Outcome::kBlocked;
    }
  }
  return Outcome::kBudgetSpent;
}

EpollBackend::Outcome EpollBackend::accept_multishot(Operation& op, FdState& s) noexcept {
  const int fd = op.fd;
  if (!ensure_nonblocking(fd, s)) {
    complete(op, -errno);
    return Outcome::kCompleted;
  }
  for (int i = 0; i < kAcceptBudget; ++i) {
    const int accepted = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (accepted >= 0) {
      completions_.push_back({&op, accepted, kCompletionMore});
      continue;
    }
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;  // that peer left; the next one
    if (would_block(error)) {
      s.readable = false;
      return Outcome::kBlocked;
    }
    // EMFILE, ENFILE, ENOBUFS...: ends it, as on io_uring; the owner backs off and restarts.
    complete(op, -error);
    return Outcome::kCompleted;
  }
  return Outcome::kBudgetSpent;
}

// ---- waiting ----

void EpollBackend::park(Operation& op, FdState& s, Direction d) noexcept {
  set_state(op, kParked);
  WaitList& list = list_of(s, d);
  op.next = nullptr;
  op.prev = list.tail;
  if (list.tail) {
    list.tail->next = &op;
  } else {
    list.head = &op;
  }
  list.tail = &op;
  if (op.timeout != nullptr && op.timeout->ms > 0) {
    EpollDeadline& deadline = deadline_of(*op.timeout);
    if (!deadline.armed()) {
      deadline.operation = &op;
      deadline.backend = this;
      deadline.set_callback(&on_deadline);
      owner_.add_timer(deadline, Clock::now() + std::chrono::milliseconds(op.timeout->ms));
    }
  }
}

void EpollBackend::unlink(Operation& op, FdState& s, Direction d) noexcept {
  WaitList& list = list_of(s, d);
  if (op.prev) {
    op.prev->next = op.next;
  } else {
    list.head = op.next;
  }
  if (op.next) {
    op.next->prev = op.prev;
  } else {
    list.tail = op.prev;
  }
  op.next = op.prev = nullptr;
}

void EpollBackend::run_waiters(int fd, FdState& s) noexcept {
  for (Direction d : {Direction::kRead, Direction::kWrite}) {
    WaitList& list = list_of(s, d);
    const bool& ready = d == Direction::kRead ? s.readable : s.writable;
    while (!list.empty() && ready) {
      Operation& op = *list.head;
      const Outcome outcome = perform(op, s);
      if (outcome == Outcome::kCompleted) {
        unlink(op, s, d);
        continue;
      }
      if (outcome == Outcome::kBudgetSpent && !s.revisit) {
        s.revisit = true;
        revisit_.push_back(fd);
      }
      break;
    }
  }
  settle(fd, s);
}

// An fd that is not attached is watched only while something waits on it, one shot at a time.
void EpollBackend::settle(int fd, FdState& s) noexcept {
  if (s.attached) return;
  const uint32_t wanted = (s.readers.empty() ? 0u : uint32_t{EPOLLIN | EPOLLRDHUP}) |
                          (s.writers.empty() ? 0u : uint32_t{EPOLLOUT});
  if (wanted == 0) {
    forget(s);
  } else if (wanted != s.armed) {
    arm_one_shot(fd, s, wanted);
  }
}

void EpollBackend::arm_one_shot(int fd, FdState& s, uint32_t events) noexcept {
  epoll_event event{};
  event.events = events | EPOLLONESHOT;
  event.data.u64 = event_data(fd, s.generation);
  // The number may name another file since we last saw it: MOD then finds nothing (ENOENT),
  // and ADD of a file still registered says EEXIST.
  int op = s.in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  int ret = ::epoll_ctl(epoll_fd_.get(), op, fd, &event);
  if (ret != 0 && op == EPOLL_CTL_MOD && errno == ENOENT) {
    ret = ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event);
  } else if (ret != 0 && op == EPOLL_CTL_ADD && errno == EEXIST) {
    ret = ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &event);
  }
  if (ret == 0) {
    s.in_set = true;
    s.armed = events;
    return;
  }
  // EPERM: epoll cannot watch it, though it said EAGAIN; EBADF: it is gone. Either way
  // nothing would ever wake the waiters.
  const int error = errno;
  cancel_parked(s, error == EPERM ? -EAGAIN : -error);
  forget(s);
}

void EpollBackend::forget(FdState& s) noexcept {
  s.attached = false;
  s.armed = 0;
  s.readable = s.writable = false;
  s.read_closed = false;
  s.nonblocking = false;
  s.stream = -1;
  ++s.generation;  // events still on their way from the old registration are ignored
}

size_t EpollBackend::cancel_parked(FdState& s, int32_t res) noexcept {
  size_t count = 0;
  for (Direction d : {Direction::kRead, Direction::kWrite}) {
    WaitList& list = list_of(s, d);
    while (!list.empty()) {
      Operation& op = *list.head;
      unlink(op, s, d);
      complete(op, res);
      ++count;
    }
  }
  return count;
}

void EpollBackend::on_event(const epoll_event& event) noexcept {
  if (event.data.u64 == kWorkersTag) {
    on_files_done();
    return;
  }
  const auto fd = static_cast<int>(static_cast<uint32_t>(event.data.u64));
  const auto generation = static_cast<uint32_t>(event.data.u64 >> 32);
  if (static_cast<size_t>(fd) >= fds_.size()) return;
  FdState& s = fds_[static_cast<size_t>(fd)];
  if (s.generation != generation) return;  // an old registration of this fd number
  if (!s.attached) s.armed = 0;            // a one-shot registration is spent
  if (event.events & kReadEvents) s.readable = true;
  if (event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s.read_closed = true;
  if (event.events & kWriteEvents) s.writable = true;
  run_waiters(fd, s);
}

void EpollBackend::on_files_done() noexcept {
  files_done_.clear();
  workers_.take_done(files_done_);
  for (const FileWorkers::Done& done : files_done_) complete(*done.op, done.res);
}

void EpollBackend::on_deadline(TimerNode& node) noexcept {
  auto& deadline = static_cast<EpollDeadline&>(node);
  EpollBackend& self = *deadline.backend;
  Operation& op = *deadline.operation;
  if (state_of_op(op) != kParked) return;
  FdState& s = self.fds_[static_cast<size_t>(op.fd)];
  const Direction d = direction_of(op.code);
  self.unlink(op, s, d);
  self.complete(op, -ETIMEDOUT);
  self.settle(op.fd, s);
}

// ---- attach / detach ----

void EpollBackend::attach(int fd) noexcept {
  if (fd < 0) return;
  FdState& s = state_of(fd);
  if (s.attached) return;
  ++s.generation;
  epoll_event event{};
  event.events = kAttachedEvents;
  event.data.u64 = event_data(fd, s.generation);
  int ret = ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event);
  if (ret != 0 && errno == EEXIST) ret = ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &event);
  if (ret != 0) {  // EPERM: a regular file; it stays an fd that is tried every time
    if (!s.readers.empty() || !s.writers.empty()) {
      s.armed = 0;
      settle(fd, s);
    }
    return;
  }
  // The registration reports the current readiness as a first edge: hints start unset.
  s.attached = true;
  s.in_set = true;
  s.armed = 0;
  s.readable = s.writable = false;
  s.read_closed = false;
  s.nonblocking = false;
  s.stream = -1;
}

void EpollBackend::detach(int fd) noexcept {
  if (fd < 0 || static_cast<size_t>(fd) >= fds_.size()) return;
  FdState& s = fds_[static_cast<size_t>(fd)];
  if (!s.attached) return;
  if (!s.readers.empty() || !s.writers.empty()) {
    // Still waited on: watched one shot at a time from here on, under a new generation.
    s.attached = false;
    ++s.generation;
    s.armed = 0;
    settle(fd, s);
    return;
  }
  // No epoll_ctl: closing the fd drops the registration, and until then its events carry an
  // old generation and are ignored.
  forget(s);
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
