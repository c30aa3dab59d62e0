// The system call of each single-shot operation the epoll backend performs when the fd is
// ready, connect in steps, and datagram sends batched into one sendmmsg.

#include <cerrno>

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "EpollBackend.h"
#include "EpollState.h"

namespace ucp::detail {

using namespace epoll;  // EpollState.h

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

}  // namespace ucp::detail
