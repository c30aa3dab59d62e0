// The multishot operations emulated on readiness: a stream receive into the loop's receive
// buffers, a datagram receive (recvmmsg) in io_uring's buffer layout, and accept. Each serves
// at most its budget per event and leaves the rest to the next iteration.

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/socket.h>
#include <sys/uio.h>

#include "ucp/io/detail/DatagramLayout.h"

#include "EpollBackend.h"
#include "EpollState.h"

namespace ucp::detail {

using namespace epoll;  // EpollState.h

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

}  // namespace ucp::detail
