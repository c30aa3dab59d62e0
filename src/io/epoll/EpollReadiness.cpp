// The readiness side of the epoll backend: the FIFO wait lists of each fd, its epoll
// registration (persistent for attached fds, one-shot for the others), events, and the
// deadlines of parked operations.

#include <cerrno>

#include <sys/epoll.h>

#include "ucp/io/EventLoop.h"

#include "EpollBackend.h"
#include "EpollState.h"

namespace ucp::detail {

using namespace epoll;  // EpollState.h

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

}  // namespace ucp::detail
