#pragma once
// What the parts of the epoll backend share besides the class (EpollBackend.h): how an
// operation's backend_state is encoded, the event masks and budgets, and the small helpers
// every part calls (inline here, so that splitting the class over files costs no call). The
// backend is one class in five files, one responsibility each:
//   EpollBackend.cpp   creation, submission, cancelling, delivering completions, poll()
//   EpollReadiness.cpp the wait lists, the epoll registrations (persistent for attached fds,
//                      one-shot for the others), events, attach/detach, operation deadlines
//   EpollSyscalls.cpp  the system call of each single-shot operation (perform), connect in
//                      steps, and datagram sends batched into one sendmmsg
//   EpollMultishot.cpp the multishot stream receive, datagram receive and accept, emulated
//   EpollFiles.cpp     regular files: RWF_NOWAIT first, then the worker threads

#include <cerrno>
#include <cstdint>
#include <memory>
#include <new>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "EpollBackend.h"

namespace ucp::detail {
namespace epoll {

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

inline uint32_t state_of_op(const Operation& op) noexcept { return op.backend_state & kStateMask; }
inline void set_state(Operation& op, uint32_t state) noexcept {
  op.backend_state = static_cast<uint16_t>((op.backend_state & ~kStateMask) | state);
}
inline uint64_t event_data(int fd, uint32_t generation) noexcept {
  return uint64_t{generation} << 32 | static_cast<uint32_t>(fd);
}
inline bool would_block(int error) noexcept { return error == EAGAIN || error == EWOULDBLOCK; }

static_assert(sizeof(EpollDeadline) <= LinkedTimeout::kStorageBytes);

// The operation's deadline timer, made in its LinkedTimeout's storage on first use and ended
// with the LinkedTimeout (~TimerNode takes a lazily cancelled timer out of the heap).
inline EpollDeadline& deadline_of(LinkedTimeout& timeout) noexcept {
  if (timeout.end == nullptr) {
    ::new (static_cast<void*>(timeout.storage)) EpollDeadline();
    timeout.end = [](LinkedTimeout& t) noexcept { std::destroy_at(&t.state<EpollDeadline>()); };
  }
  return timeout.state<EpollDeadline>();
}

// The length of a gathering send: a shorter result means the socket buffer is full.
inline size_t total_length(const msghdr& message) noexcept {
  size_t total = 0;
  for (size_t i = 0; i < message.msg_iovlen; ++i) total += message.msg_iov[i].iov_len;
  return total;
}

}  // namespace epoll

inline EpollBackend::Direction EpollBackend::direction_of(OpCode code) noexcept {
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

inline bool EpollBackend::ensure_nonblocking(int fd, FdState& s) noexcept {
  if (s.nonblocking) return true;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  if (!(flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  s.nonblocking = true;  // kept while the fd is attached or waited on
  return true;
}

inline bool EpollBackend::is_stream(int fd, FdState& s) noexcept {
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
inline bool EpollBackend::drained(int fd, FdState& s, Direction d) noexcept {
  if (!s.attached) return false;  // no hints kept: the one-shot registration is level-triggered
  if (d == Direction::kRead && s.read_closed) return false;
  return is_stream(fd, s);
}

inline void EpollBackend::clear_hint(FdState& s, Direction d) noexcept {
  (d == Direction::kRead ? s.readable : s.writable) = false;
}

}  // namespace ucp::detail
