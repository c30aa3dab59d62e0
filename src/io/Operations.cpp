#include "ucp/io/Operations.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "ucp/io/detail/LoopAccess.h"

namespace ucp::detail {

bool OperationAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  op_.waiter = caller;
  return LoopAccess::submit(loop_, op_);
}

void OperationAwaiter::cancel() noexcept { LoopAccess::cancel(loop_, op_); }

}  // namespace ucp::detail

namespace ucp::io {

RecvOp::RecvOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint32_t timeout_ms) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kRecv;
  op_.fd = fd;
  op_.data = buffer.data();
  op_.size = static_cast<uint32_t>(std::min<size_t>(buffer.size(), UINT32_MAX));
  timeout_.ms = timeout_ms;
  if (timeout_ms > 0) op_.timeout = &timeout_;
}

bool RecvOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (op_.result != 0) return false;  // set_result(): complete without I/O
  if (op_.size == 0) {                // 0 from recv must mean EOF and nothing else
    op_.result = -EINVAL;
    return false;
  }
  return detail::OperationAwaiter::await_suspend(caller);
}

SendOp::SendOp(EventLoop& loop, int fd, std::span<const std::byte> data) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kSend;
  op_.fd = fd;
  op_.data = const_cast<std::byte*>(data.data());
  op_.size = static_cast<uint32_t>(std::min<size_t>(data.size(), UINT32_MAX));
}

SendAllOp::SendAllOp(EventLoop& loop, int socket, std::span<const std::byte> bytes) noexcept
    : loop_(loop), data_(bytes) {
  op().code = detail::OpCode::kSend;
  op().fd = socket;
  op().on_complete = hook<&SendAllOp::on_send>;
}

bool SendAllOp::start(std::coroutine_handle<> caller) noexcept {
  op().waiter = caller;
  if (data_.empty()) {
    result_ = 0;
    return false;
  }
  if (!submit_next()) {
    result_ = op().result;
    return false;
  }
  return true;
}

bool SendAllOp::submit_next() noexcept {
  const size_t left = data_.size() - sent_;
  op().data = const_cast<std::byte*>(data_.data() + sent_);
  op().size = static_cast<uint32_t>(std::min<size_t>(left, UINT32_MAX));
  return detail::LoopAccess::submit(loop_, op());
}

std::coroutine_handle<> SendAllOp::on_send(int32_t res, uint32_t) noexcept {
  if (res > 0) {
    sent_ += static_cast<size_t>(res);
    // A short send: the rest goes out from here, without waking the coroutine.
    if (sent_ < data_.size() && submit_next()) return {};
    if (sent_ < data_.size()) res = op().result;  // refused
  } else if (res == 0) {
    res = -EPIPE;  // nothing sent of a non-empty buffer: the peer is gone
  }
  result_ = res > 0 ? 0 : res;
  return op().waiter;
}

ReadOp::ReadOp(EventLoop& loop, int fd, std::span<std::byte> buffer, uint64_t offset) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kRead;
  op_.fd = fd;
  op_.data = buffer.data();
  op_.size = static_cast<uint32_t>(std::min<size_t>(buffer.size(), UINT32_MAX));
  op_.offset = offset;
}

bool ReadOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (op_.size == 0) {
    op_.result = -EINVAL;
    return false;
  }
  return detail::OperationAwaiter::await_suspend(caller);
}

WriteOp::WriteOp(EventLoop& loop, int fd, std::span<const std::byte> data, uint64_t offset) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kWrite;
  op_.fd = fd;
  op_.data = const_cast<std::byte*>(data.data());
  op_.size = static_cast<uint32_t>(std::min<size_t>(data.size(), UINT32_MAX));
  op_.offset = offset;
}

RecvMsgOp::RecvMsgOp(EventLoop& loop, int fd, msghdr& message) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kRecvMsg;
  op_.fd = fd;
  op_.data = &message;
}

SendMsgOp::SendMsgOp(EventLoop& loop, int fd, const msghdr& message) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kSendMsg;
  op_.fd = fd;
  op_.data = const_cast<msghdr*>(&message);
}

OpenAtOp::OpenAtOp(EventLoop& loop, int directory, const char* path, int flags,
                   mode_t mode) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kOpenAt;
  op_.fd = directory;
  op_.data = const_cast<char*>(path);
  op_.size = static_cast<uint32_t>(flags | O_CLOEXEC);
  op_.offset = mode;
}

Result<UniqueFd> OpenAtOp::await_resume() const noexcept {
  if (op_.result < 0) return Unexpected{error_from_errno(-op_.result)};
  return UniqueFd(op_.result);
}

FsyncOp::FsyncOp(EventLoop& loop, int fd, bool data_only) noexcept
    : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kFsync;
  op_.fd = fd;
  op_.size = data_only ? detail::kFsyncDataOnly : 0;
}

SendFileOp::SendFileOp(EventLoop& loop, int socket_fd, int file_fd, uint64_t from,
                       uint64_t length) noexcept
    : loop_(loop), offset_(from), length_(length) {
  op().code = detail::OpCode::kSendFile;
  op().fd = socket_fd;
  op().source_fd = file_fd;
  op().on_complete = hook<&SendFileOp::on_sent>;
}

bool SendFileOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  op().waiter = caller;
  if (submit_next()) return true;
  error_ = op().result;
  return false;
}

bool SendFileOp::submit_next() noexcept {
  // A result must fit an int32_t: at most 1 GiB per operation.
  constexpr uint64_t kMaxPerOperation = uint64_t{1} << 30;
  op().offset = offset_ + sent_;
  op().size = static_cast<uint32_t>(std::min(length_ - sent_, kMaxPerOperation));
  in_flight_ = detail::LoopAccess::submit(loop_, op());
  return in_flight_;
}

std::coroutine_handle<> SendFileOp::on_sent(int32_t res, uint32_t) noexcept {
  in_flight_ = false;
  if (res > 0) {
    sent_ += static_cast<uint64_t>(res);
    if (sent_ < length_) {
      // Short: the rest goes out from here, without waking the coroutine.
      if (cancelled_) {
        error_ = -ECANCELED;
      } else if (submit_next()) {
        return {};
      } else {
        error_ = op().result;  // refused
      }
    }
  } else if (res < 0) {
    error_ = res;
  }
  return op().waiter;  // res == 0: the file ended
}

void SendFileOp::cancel() noexcept {
  cancelled_ = true;  // no further piece after the one in flight
  if (in_flight_) detail::LoopAccess::cancel(loop_, op());
}

Result<uint64_t> SendFileOp::await_resume() const noexcept {
  if (error_ != 0) return Unexpected{error_from_errno(-error_)};
  return sent_;
}

AcceptOp::AcceptOp(EventLoop& loop, int listen_fd) noexcept : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kAccept;
  op_.fd = listen_fd;
  op_.data = &peer_;
  op_.aux = &peer_length_;
}

Result<Accepted> AcceptOp::await_resume() noexcept {
  if (op_.result < 0) return Unexpected{error_from_errno(-op_.result)};
  return Accepted{UniqueFd(op_.result), peer_};
}

ConnectOp::ConnectOp(EventLoop& loop, int fd, const sockaddr* address, socklen_t length) noexcept
    : detail::OperationAwaiter(loop) {
  const auto size = std::min<socklen_t>(length, sizeof(sockaddr_storage));
  std::memcpy(&address_, address, size);
  op_.code = detail::OpCode::kConnect;
  op_.fd = fd;
  op_.data = &address_;
  op_.size = size;
}

CloseOp::CloseOp(EventLoop& loop, int fd) noexcept : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kClose;
  op_.fd = fd;
}

bool CloseOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  detail::LoopAccess::detach(loop_, op_.fd);
  if (detail::OperationAwaiter::await_suspend(caller)) return true;
  op_.result = ::close(op_.fd) == 0 ? 0 : -errno;  // the loop cannot take it: never leak the fd
  return false;
}

CancelFdOp::CancelFdOp(EventLoop& loop, int fd) noexcept : detail::OperationAwaiter(loop) {
  op_.code = detail::OpCode::kCancelFd;
  op_.fd = fd;
}

Result<size_t> CancelFdOp::await_resume() const noexcept {
  if (op_.result == -ENOENT) return size_t{0};  // nothing was in flight
  return bytes_from_cqe(op_.result);
}

SleepOp::SleepOp(EventLoop& loop, Clock::time_point due) noexcept
    : TimerNode(hook<&SleepOp::on_fire>), loop_(loop), due_(due) {}

bool SleepOp::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (loop_.io_closed() || cancelled_) {
    cancelled_ = true;
    return false;
  }
  waiter_ = caller;
  loop_.add_timer(timer(), due_);
  return true;
}

void SleepOp::on_fire() noexcept { loop_.schedule(std::exchange(waiter_, {})); }

void SleepOp::cancel() noexcept {
  if (cancelled_) return;
  cancelled_ = true;
  if (!waiter_) return;  // not waiting (yet): await_suspend will see the flag
  loop_.cancel_timer(timer());
  loop_.schedule(std::exchange(waiter_, {}));
}

Result<void> SleepOp::await_resume() const noexcept {
  if (cancelled_) return Unexpected{std::errc::operation_canceled};
  return {};
}

}  // namespace ucp::io
