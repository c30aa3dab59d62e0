#include "ucp/net/TcpConnection.h"

#include <cassert>
#include <cerrno>

#include <sys/socket.h>

#include "ucp/io/FixedBuffers.h"

namespace ucp {
namespace {

// receive() without a free registered buffer reads into a pool block; this size keeps the
// block (with its pool header) in the 4 KiB class.
constexpr size_t kPooledReceiveBytes = 4096 - 16;

}  // namespace

TcpConnection::TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms) noexcept
    : loop_(loop), fd_(std::move(fd)), peer_(peer), read_timeout_ms_(read_timeout_ms) {
  if (loop_.buffer_ring() != nullptr) {
    multishot_.emplace(loop_, fd_.get());
    multishot_->set_hooks(this, &on_multishot_final, &on_multishot_starved);
  }
  read_deadline_.connection = this;
  read_deadline_.fire = &on_read_deadline;
}

TcpConnection::~TcpConnection() {
  // Freeing a connection with an SQE in flight would let the kernel write into freed
  // memory: close() must have run (or nothing was ever started).
  assert(in_flight_ == 0);
  assert(writer_ == nullptr && waiting_head_ == nullptr);
  loop_.remove_deadline(read_deadline_);
}

void TcpConnection::operation_finished() noexcept {
  if (--in_flight_ == 0 && drain_waiter_) loop_.schedule(std::exchange(drain_waiter_, {}));
}

// ---- reads ----
//
// Two ways to read, chosen per loop at start-up:
// - multishot (the loop has a provided buffer ring): one armed receive delivers data into
//   ring buffers; read() copies it out, without suspending when data is already there. The
//   read timeout is a coarse per-loop deadline, since a linked timeout would end the whole
//   multishot receive.
// - single-shot: one recv per read into the caller's buffer with IORING_OP_LINK_TIMEOUT.

TcpConnection::ReadAwaiter::ReadAwaiter(TcpConnection& connection,
                                        std::span<std::byte> buffer) noexcept
    : io::RecvOp(connection.loop_, connection.fd_.get(), buffer, connection.read_timeout_ms_),
      connection_(connection),
      destination_(buffer) {}

TcpConnection::ReadAwaiter::ReadAwaiter(TcpConnection& connection,
                                        io::BufferLease* lend_into) noexcept
    : io::RecvOp(connection.loop_, connection.fd_.get(), {}, connection.read_timeout_ms_),
      connection_(connection),
      lease_(lend_into) {}

bool TcpConnection::ReadAwaiter::await_ready() const noexcept {
  const auto& multishot = connection_.multishot_;
  return multishot && wants_data() && multishot->has_data() && !connection_.reading_stopped_;
}

bool TcpConnection::ReadAwaiter::start_single_shot(std::coroutine_handle<> caller) noexcept {
  if (lease_ != nullptr && lease_->source() == io::BufferLease::Source::kNone) {
    // Borrow a registered buffer when one is free, else a pool block, for this read only.
    io::FixedBuffers* fixed = connection_.loop_.fixed_buffers();
    if (auto index = fixed ? fixed->acquire() : std::nullopt) {
      *lease_ = io::BufferLease::from_fixed(*fixed, *index);
      set_buffer(lease_->writable(), *index);
    } else {
      *lease_ = io::BufferLease::from_pool(kPooledReceiveBytes);
      set_buffer(lease_->writable());
    }
  }
  if (!io::RecvOp::await_suspend(caller)) return false;
  mode_ = Mode::kSingleShot;
  connection_.current_read_ = this;
  connection_.operation_started();
  return true;
}

bool TcpConnection::ReadAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  caller_ = caller;
  if (connection_.reading_stopped_ || connection_.closed_) {
    op_.result = -ECANCELED;
    return false;
  }
  auto& multishot = connection_.multishot_;
  if (!multishot || !wants_data()) return start_single_shot(caller);
  if (multishot->has_data() || multishot->at_eof() || multishot->error() != 0) return false;
  if (multishot->needs_fallback()) {  // the ring ran dry last time: read into our buffer
    multishot->clear_fallback();
    return start_single_shot(caller);
  }
  if (!multishot->armed()) {
    if (!multishot->arm()) return false;  // error() tells why
    connection_.operation_started();      // until its final CQE
  }
  multishot->set_waiter(caller);
  mode_ = Mode::kMultishot;
  connection_.current_read_ = this;
  if (connection_.read_timeout_ms_ > 0) {
    connection_.loop_.add_deadline(connection_.read_deadline_, connection_.read_timeout_ms_);
  }
  return true;
}

Result<size_t> TcpConnection::ReadAwaiter::await_resume() noexcept {
  TcpConnection& c = connection_;
  Result<size_t> result = size_t{0};
  if (mode_ == Mode::kSingleShot) {
    c.current_read_ = nullptr;
    c.operation_finished();
    result = io::RecvOp::await_resume();
    if (lease_ != nullptr) {
      if (result && *result > 0) {
        lease_->set_size(*result);
      } else {
        lease_->reset();
      }
    }
  } else {
    if (mode_ == Mode::kMultishot) {
      c.current_read_ = nullptr;
      c.loop_.remove_deadline(c.read_deadline_);
    }
    auto& multishot = c.multishot_;
    if (c.read_timed_out_) {
      result = Unexpected{std::errc::timed_out};
    } else if (op_.result < 0 || !multishot) {
      result = io::RecvOp::await_resume();  // refused before anything was submitted
    } else if (multishot->has_data()) {
      if (lease_ != nullptr) {
        *lease_ = multishot->lend_front();
        result = lease_->size();
      } else {
        result = multishot->copy_out(destination_);
      }
    } else if (multishot->at_eof()) {
      result = size_t{0};
    } else if (multishot->error() != 0) {
      result = bytes_from_cqe(multishot->error());
    } else if (c.reading_stopped_) {
      result = Unexpected{std::errc::operation_canceled};
    }
  }
  if (result) c.bytes_read_ += *result;
  return result;
}

void TcpConnection::on_multishot_final(void* self) noexcept {
  static_cast<TcpConnection*>(self)->operation_finished();
}

std::coroutine_handle<> TcpConnection::on_multishot_starved(void* self) noexcept {
  // The provided ring ran dry before this connection got data: do this one read with an
  // ordinary recv into the reader's own buffer rather than spinning on ENOBUFS.
  auto* c = static_cast<TcpConnection*>(self);
  ReadAwaiter* reader = c->current_read_;
  if (reader == nullptr) return {};
  c->loop_.remove_deadline(c->read_deadline_);
  c->multishot_->clear_fallback();
  if (reader->start_single_shot(reader->caller_)) return {};
  return reader->caller_;  // refused: it resumes and reports the error
}

void TcpConnection::on_read_deadline(io::DeadlineNode& node) noexcept {
  TcpConnection* c = static_cast<ReadDeadline&>(node).connection;
  ReadAwaiter* reader = c->current_read_;
  if (reader == nullptr || reader->mode_ != ReadAwaiter::Mode::kMultishot) return;
  c->read_timed_out_ = true;
  c->reading_stopped_ = true;  // a timed-out connection reads no more
  c->current_read_ = nullptr;
  c->multishot_->set_waiter({});
  c->multishot_->cancel();
  c->loop_.schedule(reader->caller_);
}

void TcpConnection::stop_reading() noexcept {
  reading_stopped_ = true;
  if (current_read_ == nullptr) return;
  if (current_read_->mode_ == ReadAwaiter::Mode::kSingleShot) {
    io::request_cancel(loop_, current_read_->operation_context());
  } else {
    // Resume the reader now with operation_canceled; the receive's last CQE comes later.
    ReadAwaiter* reader = std::exchange(current_read_, nullptr);
    loop_.remove_deadline(read_deadline_);
    multishot_->set_waiter({});
    multishot_->cancel();
    loop_.schedule(reader->caller_);
  }
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
  loop_.remove_deadline(read_deadline_);
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
