#include "ucp/net/TcpConnection.h"

#include <sys/socket.h>

#include <cassert>
#include <cerrno>

namespace ucp {

TcpConnection::TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms) noexcept
    : loop_(loop), fd_(std::move(fd)), peer_(peer), read_timeout_ms_(read_timeout_ms) {}

TcpConnection::~TcpConnection() {
  // Freeing a connection with an SQE in flight would let the kernel write into freed
  // memory: close() must have run (or nothing was ever started).
  assert(in_flight_ == 0);
  assert(writer_ == nullptr && waiting_head_ == nullptr);
}

void TcpConnection::operation_finished() noexcept {
  if (--in_flight_ == 0 && drain_waiter_) loop_.schedule(std::exchange(drain_waiter_, {}));
}

// ---- reads ----

TcpConnection::ReadAwaiter::ReadAwaiter(TcpConnection& connection,
                                        std::span<std::byte> buffer) noexcept
    : io::RecvOp(connection.loop_, connection.fd_.get(), buffer, connection.read_timeout_ms_),
      connection_(connection) {}

bool TcpConnection::ReadAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (connection_.reading_stopped_ || connection_.closed_) {
    op_.result = -ECANCELED;
    return false;
  }
  if (!io::RecvOp::await_suspend(caller)) return false;
  submitted_ = true;
  connection_.current_read_ = this;
  connection_.operation_started();
  return true;
}

Result<size_t> TcpConnection::ReadAwaiter::await_resume() noexcept {
  if (submitted_) {
    connection_.current_read_ = nullptr;
    connection_.operation_finished();
  }
  auto result = io::RecvOp::await_resume();
  if (result) connection_.bytes_read_ += *result;
  return result;
}

void TcpConnection::stop_reading() noexcept {
  reading_stopped_ = true;
  if (current_read_) io::request_cancel(loop_, current_read_->operation_context());
}

// ---- writes ----

TcpConnection::WriteAwaiter::WriteAwaiter(TcpConnection& connection,
                                          std::span<const std::byte> data) noexcept
    : io::SendAllOp(connection.loop_, connection.fd_.get(), data), connection_(connection) {}

bool TcpConnection::WriteAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  caller_ = caller;
  if (connection_.closed_) {
    refused_ = -ECANCELED;
    return false;
  }
  if (connection_.writer_ != nullptr) {  // one send in flight per socket: wait behind it
    if (connection_.waiting_tail_) {
      connection_.waiting_tail_->next_waiting_ = this;
    } else {
      connection_.waiting_head_ = this;
    }
    connection_.waiting_tail_ = this;
    return true;
  }
  if (!start(caller)) return false;
  started_ = true;
  connection_.writer_ = this;
  connection_.operation_started();
  return true;
}

Result<void> TcpConnection::WriteAwaiter::await_resume() noexcept {
  if (refused_ != 0) return Unexpected{error_from_errno(-refused_)};
  if (started_) {
    connection_.bytes_written_ += sent();
    connection_.writer_ = nullptr;
    connection_.operation_finished();
    connection_.start_next_writer();
  }
  return io::SendAllOp::await_resume();
}

void TcpConnection::start_next_writer() noexcept {
  while (writer_ == nullptr && waiting_head_ != nullptr) {
    WriteAwaiter* next = waiting_head_;
    waiting_head_ = next->next_waiting_;
    if (!waiting_head_) waiting_tail_ = nullptr;
    if (closed_) {
      next->refused_ = -ECANCELED;
      loop_.schedule(next->caller_);
      continue;
    }
    if (next->start(next->caller_)) {
      next->started_ = true;
      writer_ = next;
      operation_started();
    } else {
      next->refused_ = next->result() != 0 ? next->result() : -ECANCELED;
      loop_.schedule(next->caller_);
    }
  }
}

// ---- close ----

void TcpConnection::shutdown_write() noexcept {
  if (!closed_) ::shutdown(fd_.get(), SHUT_WR);
}

Task<> TcpConnection::close() {
  if (closed_) co_return;
  closed_ = true;
  reading_stopped_ = true;
  // Writers still waiting for their turn will never get it.
  while (waiting_head_) {
    WriteAwaiter* next = waiting_head_;
    waiting_head_ = next->next_waiting_;
    next->refused_ = -ECANCELED;
    loop_.schedule(next->caller_);
  }
  waiting_tail_ = nullptr;
  if (in_flight_ > 0) {
    // close(2) would not cancel a pending receive (PITFALLS #15): shut the socket down,
    // cancel everything on the fd, and wait for every CQE before the fd number is freed.
    ::shutdown(fd_.get(), SHUT_RDWR);
    (void)co_await io::cancel_fd(loop_, fd_.get());
    co_await DrainAwaiter{*this};
  }
  (void)co_await io::close(loop_, fd_.release());
}

}  // namespace ucp
