#pragma once
// Awaitable operations. Each awaiter is one in-flight operation (io/detail/Operation.h): it lives
// in the awaiting coroutine's frame, and its completion resumes exactly that coroutine.
// `await_suspend` only hands the descriptor to the loop; the loop starts the whole
// iteration's batch at once, on whichever backend it runs.
//
// Errors are values: every awaiter returns Result<...>, with -errno turned into
// std::error_code in one place. Special cases:
//   - recv with a timeout: timed_out when the deadline passes first; data that arrives as it
//     fires is returned, never lost. A cancel reads as operation_canceled.
//   - a zero-length recv is refused (EINVAL) instead of started: 0 means EOF only.
//   - when the loop has no submission room left: resource_unavailable_try_again.
//   - once the loop is shutting down: operation_canceled without touching the kernel.
//
// Thread contract: the loop's own thread only.

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Timer.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp::io {

/// An offset that means the file position (read and write, like read(2) and write(2)).
using detail::kCurrentPosition;

/// One receive into `buffer`; with `timeout_ms` > 0 it ends with timed_out after that long
/// without data (io_uring: a linked IORING_OP_LINK_TIMEOUT).
class [[nodiscard]] RecvOp : public detail::OperationAwaiter {
 public:
  RecvOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint32_t timeout_ms = 0) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
  /// `index` >= 0: `buffer` lies in that registered buffer (BufferLease::registered_index).
  void set_registered_buffer(int32_t index) noexcept { op_.buffer_index = index; }
  /// Resumes the coroutine now with this result, without any I/O.
  void set_result(int32_t res) noexcept { op_.result = res; }

 private:
  detail::LinkedTimeout timeout_;
};

/// One send(2) that never raises SIGPIPE (may be short; see SendAllOp).
class [[nodiscard]] SendOp : public detail::OperationAwaiter {
 public:
  SendOp(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
};

/// Sends all of `data`, re-submitting after short sends inside the completion (the coroutine
/// resumes once: all sent, or the first error). `start` may be called later than
/// construction, e.g. when the awaiter waited its turn behind another send.
class [[nodiscard]] SendAllOp : private detail::Operation {
 public:
  SendAllOp(EventLoop& loop, int socket, std::span<const std::byte> bytes) noexcept;
  SendAllOp(const SendAllOp&) = delete;
  SendAllOp& operator=(const SendAllOp&) = delete;
  bool await_ready() const noexcept { return false; }
  /// Starts the first send; false if it completed at once (error in result()).
  bool start(std::coroutine_handle<> caller) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return start(caller); }
  Result<void> await_resume() const noexcept { return void_from_cqe(result_); }
  size_t sent() const noexcept { return sent_; }
  int32_t result() const noexcept { return result_; }

 private:
  friend HookAccess;
  std::coroutine_handle<> on_send(int32_t res, uint32_t completion) noexcept;
  bool submit_next() noexcept;
  detail::Operation& op() noexcept { return *this; }

  EventLoop& loop_;
  std::span<const std::byte> data_;
  size_t sent_ = 0;
  int32_t result_ = 0;
};

/// Files and pipes: one read at `offset` (kCurrentPosition: the file position).
class [[nodiscard]] ReadOp : public detail::OperationAwaiter {
 public:
  ReadOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint64_t offset) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
};

class [[nodiscard]] WriteOp : public detail::OperationAwaiter {
 public:
  WriteOp(EventLoop& loop, int fd, std::span<const std::byte> data, uint64_t offset) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
};

/// One datagram received into `message` (its buffers, and msg_name for the source); the value is
/// the payload bytes (msg_flags says MSG_TRUNC when the datagram was longer). All of `message`
/// must live until the coroutine resumes.
class [[nodiscard]] RecvMsgOp : public detail::OperationAwaiter {
 public:
  RecvMsgOp(EventLoop& loop, int fd, msghdr& message) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
};

/// One sendmsg(2) that never raises SIGPIPE: on a datagram socket, one datagram (to msg_name, if
/// set). `message` and what it points to must live until the coroutine resumes.
class [[nodiscard]] SendMsgOp : public detail::OperationAwaiter {
 public:
  SendMsgOp(EventLoop& loop, int fd, const msghdr& message) noexcept;
  Result<size_t> await_resume() const noexcept { return bytes_from_cqe(op_.result); }
};

/// Opens `path` (relative to `directory`; AT_FDCWD: the working directory) with open(2)'s
/// `flags` (O_CLOEXEC is always added) and `mode`. io_uring: IORING_OP_OPENAT; epoll: openat(2)
/// on a file worker thread, since opening may wait for the disk. `path` must live until the
/// coroutine resumes.
class [[nodiscard]] OpenAtOp : public detail::OperationAwaiter {
 public:
  OpenAtOp(EventLoop& loop, int directory, const char* path, int flags, mode_t mode) noexcept;
  Result<UniqueFd> await_resume() const noexcept;
};

/// fsync(2), or fdatasync(2) with `data_only`.
class [[nodiscard]] FsyncOp : public detail::OperationAwaiter {
 public:
  FsyncOp(EventLoop& loop, int fd, bool data_only) noexcept;
  Result<void> await_resume() const noexcept { return void_from_cqe(op_.result); }
};

/// Sends `length` bytes of the file `file_fd` from `offset` to the socket `socket_fd` without
/// copying them through user memory (io_uring: splice through a pipe; epoll: sendfile(2)).
/// Short transfers are continued inside the completion, so the coroutine resumes once: with the
/// bytes sent, fewer than `length` only when the file ended first, or the first error (sent()
/// then says how far it got). Neither fd's file position moves.
class [[nodiscard]] SendFileOp : private detail::Operation {
 public:
  SendFileOp(EventLoop& loop, int socket_fd, int file_fd, uint64_t from, uint64_t length) noexcept;
  SendFileOp(const SendFileOp&) = delete;
  SendFileOp& operator=(const SendFileOp&) = delete;
  bool await_ready() const noexcept { return length_ == 0; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<uint64_t> await_resume() const noexcept;
  void cancel() noexcept;
  EventLoop& loop() const noexcept { return loop_; }
  uint64_t sent() const noexcept { return sent_; }

 private:
  friend HookAccess;
  std::coroutine_handle<> on_sent(int32_t res, uint32_t completion) noexcept;
  bool submit_next() noexcept;
  detail::Operation& op() noexcept { return *this; }

  EventLoop& loop_;
  uint64_t offset_;
  uint64_t length_;
  uint64_t sent_ = 0;
  int32_t error_ = 0;
  bool in_flight_ = false;
  bool cancelled_ = false;
};

struct Accepted {
  UniqueFd fd;
  sockaddr_storage peer{};
};

class [[nodiscard]] AcceptOp : public detail::OperationAwaiter {
 public:
  AcceptOp(EventLoop& loop, int listen_fd) noexcept;
  Result<Accepted> await_resume() noexcept;

 private:
  sockaddr_storage peer_{};
  socklen_t peer_length_ = sizeof(sockaddr_storage);
};

class [[nodiscard]] ConnectOp : public detail::OperationAwaiter {
 public:
  ConnectOp(EventLoop& loop, int fd, const sockaddr* address, socklen_t length) noexcept;
  Result<void> await_resume() const noexcept { return void_from_cqe(op_.result); }

 private:
  sockaddr_storage address_{};
};

/// Closes `fd` through the loop (the backend forgets what it kept about the fd first). Never
/// leaks it: when the loop cannot take the operation, the fd is closed directly.
class [[nodiscard]] CloseOp : public detail::OperationAwaiter {
 public:
  CloseOp(EventLoop& loop, int fd) noexcept;
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept { return void_from_cqe(op_.result); }
};

/// Ends every operation in flight on `fd`; the value is how many were found. Their own
/// completions still arrive, each to its own awaiter.
class [[nodiscard]] CancelFdOp : public detail::OperationAwaiter {
 public:
  CancelFdOp(EventLoop& loop, int fd) noexcept;
  Result<size_t> await_resume() const noexcept;
};

/// Completes after `duration` on the loop's timer heap; operation_canceled when cancel() is
/// called first or the loop shuts down.
class [[nodiscard]] SleepOp : private TimerNode {
 public:
  SleepOp(EventLoop& loop, Clock::time_point due) noexcept;
  SleepOp(const SleepOp&) = delete;
  SleepOp& operator=(const SleepOp&) = delete;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  Result<void> await_resume() const noexcept;
  void cancel() noexcept;
  EventLoop& loop() const noexcept { return loop_; }

 private:
  friend HookAccess;
  void on_fire() noexcept;
  TimerNode& timer() noexcept { return *this; }

  EventLoop& loop_;
  Clock::time_point due_;
  std::coroutine_handle<> waiter_;
  bool cancelled_ = false;
};

/// Reads into `buffer`; with `timeout_ms` > 0 the wait is bounded.
inline RecvOp recv(EventLoop& loop, int fd, std::span<std::byte> buffer,
                   uint32_t timeout_ms = 0) noexcept {
  return RecvOp(loop, fd, buffer, timeout_ms);
}
/// One send that never raises SIGPIPE (may be short; see TcpConnection::write_all).
inline SendOp send(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept {
  return SendOp(loop, fd, data);
}
inline ReadOp read(EventLoop& loop, int fd, std::span<std::byte> buffer,
                   uint64_t offset = kCurrentPosition) noexcept {
  return ReadOp(loop, fd, buffer, offset);
}
inline WriteOp write(EventLoop& loop, int fd, std::span<const std::byte> data,
                     uint64_t offset = kCurrentPosition) noexcept {
  return WriteOp(loop, fd, data, offset);
}
inline AcceptOp accept(EventLoop& loop, int listen_fd) noexcept {
  return AcceptOp(loop, listen_fd);
}
inline ConnectOp connect(EventLoop& loop, int fd, const sockaddr* address,
                         socklen_t length) noexcept {
  return ConnectOp(loop, fd, address, length);
}
inline CloseOp close(EventLoop& loop, int fd) noexcept { return CloseOp(loop, fd); }
inline RecvMsgOp recvmsg(EventLoop& loop, int fd, msghdr& message) noexcept {
  return RecvMsgOp(loop, fd, message);
}
inline SendMsgOp sendmsg(EventLoop& loop, int fd, const msghdr& message) noexcept {
  return SendMsgOp(loop, fd, message);
}
inline OpenAtOp openat(EventLoop& loop, int directory, const char* path, int flags,
                       mode_t mode = 0644) noexcept {
  return OpenAtOp(loop, directory, path, flags, mode);
}
inline FsyncOp fsync(EventLoop& loop, int fd) noexcept { return FsyncOp(loop, fd, false); }
inline FsyncOp fdatasync(EventLoop& loop, int fd) noexcept { return FsyncOp(loop, fd, true); }
inline SendFileOp send_file(EventLoop& loop, int socket_fd, int file_fd, uint64_t offset,
                            uint64_t length) noexcept {
  return SendFileOp(loop, socket_fd, file_fd, offset, length);
}
inline CancelFdOp cancel_fd(EventLoop& loop, int fd) noexcept { return CancelFdOp(loop, fd); }
/// Suspends for `duration` (the loop's timer heap: no kernel object per timer).
template <class Rep, class Period>
SleepOp sleep_for(EventLoop& loop, std::chrono::duration<Rep, Period> duration) noexcept {
  return SleepOp(loop, Clock::now() + std::chrono::duration_cast<Clock::duration>(duration));
}
inline SleepOp sleep_until(EventLoop& loop, Clock::time_point due) noexcept {
  return SleepOp(loop, due);
}

}  // namespace ucp::io
