#include "ucp/net/TcpConnection.h"

#include <cassert>
#include <cerrno>

#include <sys/socket.h>

#include "ucp/io/FixedBuffers.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp {
namespace {

// receive() without a free registered buffer reads into a pool block; this size keeps the
// block (with its pool header) in the 4 KiB class.
constexpr size_t kPooledReceiveBytes = 4096 - MemoryPool::kHeaderBytes;

}  // namespace

TcpConnection::TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms, OutputLimits output_limits) noexcept
    : loop_(loop),
      fd_(std::move(fd)),
      peer_(peer),
      read_timeout_ms_(read_timeout_ms),
      output_limits_(output_limits),
      send_(loop, fd_.get(), this, &on_send_complete) {
  if (loop_.buffer_ring() != nullptr) {
    multishot_.emplace(loop_, fd_.get());
    multishot_->set_hooks(this, &on_multishot_final, &on_multishot_starved);
  }
  read_deadline_.connection = this;
  read_deadline_.fire = &on_read_deadline;
  send_hook_.connection = this;
  send_hook_.run = &on_send_hook;
  flush_deadline_.connection = this;
  flush_deadline_.fire = &on_flush_deadline;
}

TcpConnection::~TcpConnection() {
  // Freeing a connection with an SQE in flight would let the kernel write into freed
  // memory: close() must have run (or nothing was ever started).
  assert(in_flight_ == 0);
  loop_.remove_deadline(read_deadline_);
  loop_.remove_deadline(flush_deadline_);
  loop_.cancel_before_submit(send_hook_);
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
  // No default of 0: a read reports EOF only when the peer's FIN was seen.
  Result<size_t> result = Unexpected{std::errc::operation_canceled};
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
    }
    // Otherwise reading was stopped (stop_reading, close): operation_canceled.
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
//
// One queue, one send in flight. A write appends to the queue and asks for a send; the
// send starts from the loop's pre-submit hook, after every coroutine ready in this
// iteration has run, so all they wrote goes out as one SQE. Its completion drops the sent
// bytes, resumes the write_all() writers whose bytes are all out, lets suspended write()
// writers go on once the queue is down to half of max_output_bytes, and asks for the next
// send. Writers are only ever scheduled, never resumed inline, so no frame can end while
// the queue is being walked.

TcpConnection::WriteAwaiter::WriteAwaiter(TcpConnection& connection,
                                          std::span<const std::byte> data, Mode mode) noexcept
    : connection_(connection), data_(data), mode_(mode) {}

bool TcpConnection::WriteAwaiter::await_ready() noexcept {
  TcpConnection& c = connection_;
  if (c.write_error_) {
    error_ = c.write_error_;
    return true;
  }
  if (c.closed_) {
    error_ = make_error_code(std::errc::operation_canceled);
    return true;
  }
  if (c.write_shut_) {
    error_ = make_error_code(std::errc::broken_pipe);
    return true;
  }
  if (data_.empty()) return true;
  if (mode_ == Mode::kBuffered && !c.output_full_ &&
      c.output_.size() + data_.size() <= c.output_limits_.max_output_bytes) {
    c.output_.append_copy(data_);
    c.request_send();
    return true;
  }
  return false;
}

void TcpConnection::WriteAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  TcpConnection& c = connection_;
  caller_ = caller;
  segment_.writer = this;
  segment_.data = data_.data();
  segment_.size = data_.size();
  // A write() that does not fit waits like write_all() but may be copied, and so resumed,
  // as soon as the queue has drained to half; until then every write() waits behind it.
  segment_.kind = mode_ == Mode::kBuffered ? SegmentKind::kAdoptable : SegmentKind::kBorrowed;
  if (mode_ == Mode::kBuffered) c.output_full_ = true;
  c.output_.append_borrowed(segment_);
  c.request_send();
}

Result<void> TcpConnection::WriteAwaiter::await_resume() const noexcept {
  if (error_) return Unexpected{error_};
  return {};
}

void TcpConnection::request_send() noexcept {
  if (!send_.in_flight() && !output_.empty()) loop_.run_before_submit(send_hook_);
}

void TcpConnection::on_send_hook(io::PreSubmitHook& hook) noexcept {
  static_cast<SendHook&>(hook).connection->start_send();
}

void TcpConnection::start_send() noexcept {
  if (send_.in_flight() || output_.empty()) return;
  if (write_error_) {  // e.g. close() gave up while this send waited for the hook
    fail_output();
    return;
  }
  iovec buffers[io::VectoredSend::kMaxBuffers];
  size_t count = output_.gather(buffers);
  if (auto started = send_.start({buffers, count}); !started) {
    write_error_ = started.error();  // loop closing, or SQ and pending queue full
    fail_output();
    return;
  }
  ++sends_submitted_;
  operation_started();
}

void TcpConnection::on_send_complete(void* self, int32_t res) noexcept {
  auto& c = *static_cast<TcpConnection*>(self);
  if (res > 0) {
    c.bytes_written_ += static_cast<uint64_t>(res);
    for (OutputSegment* done = c.output_.consume(static_cast<size_t>(res)); done != nullptr;) {
      OutputSegment* next = done->next;
      c.finish_writer(*done, {});
      done = next;
    }
    if (c.flush_waiter_) {  // progress: the peer gets another full timeout
      c.loop_.add_deadline(c.flush_deadline_, c.output_limits_.close_flush_timeout_ms);
    }
  } else if (!c.write_error_) {
    // 0 bytes of a non-empty send: the peer is gone.
    c.write_error_ = error_from_errno(res == 0 ? EPIPE : -res);
  }
  if (c.write_error_) {
    c.fail_output();
  } else {
    c.release_waiting_writers();
    if (c.output_.empty()) {
      if (c.write_shut_ && !c.closed_) ::shutdown(c.fd_.get(), SHUT_WR);
      c.wake_flush_waiter();
    } else {
      c.request_send();
    }
  }
  c.operation_finished();  // last: it may resume close(), after which `c` may be freed
}

void TcpConnection::release_waiting_writers() noexcept {
  if (!output_full_ || output_.size() > output_limits_.max_output_bytes / 2) return;
  output_full_ = false;
  for (OutputSegment* adopted = output_.adopt_waiting(); adopted != nullptr;) {
    OutputSegment* next = adopted->next;
    finish_writer(*adopted, {});
    adopted = next;
  }
}

void TcpConnection::fail_output() noexcept {
  // Only called with no send in flight: the writers' memory is theirs again.
  if (!write_error_) write_error_ = make_error_code(std::errc::operation_canceled);
  for (OutputSegment* dropped = output_.clear(); dropped != nullptr;) {
    OutputSegment* next = dropped->next;
    finish_writer(*dropped, write_error_);
    dropped = next;
  }
  output_full_ = false;
  wake_flush_waiter();
}

void TcpConnection::finish_writer(OutputSegment& segment, std::error_code error) noexcept {
  WriteAwaiter& writer = *static_cast<WriteAwaiter::Segment&>(segment).writer;
  writer.error_ = error;
  loop_.schedule(writer.caller_);
}

void TcpConnection::wake_flush_waiter() noexcept {
  if (flush_waiter_) loop_.schedule(std::exchange(flush_waiter_, {}));
}

void TcpConnection::on_flush_deadline(io::DeadlineNode& node) noexcept {
  // The peer took nothing for close_flush_timeout_ms: give up. close() goes on to cancel
  // the send in flight; its CQE drops the queue and resumes any writers with this error.
  TcpConnection* c = static_cast<FlushDeadline&>(node).connection;
  if (!c->write_error_) c->write_error_ = make_error_code(std::errc::timed_out);
  c->wake_flush_waiter();
}

bool TcpConnection::FlushAwaiter::await_ready() const noexcept {
  return connection.output_.empty() || static_cast<bool>(connection.write_error_);
}

void TcpConnection::FlushAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  connection.flush_waiter_ = caller;
  connection.loop_.add_deadline(connection.flush_deadline_,
                                connection.output_limits_.close_flush_timeout_ms);
}

void TcpConnection::FlushAwaiter::await_resume() const noexcept {
  connection.loop_.remove_deadline(connection.flush_deadline_);
}

// ---- close ----

void TcpConnection::shutdown_write() noexcept {
  if (closed_ || write_shut_) return;
  write_shut_ = true;
  if (output_.empty()) ::shutdown(fd_.get(), SHUT_WR);  // else when the last send completes
}

Task<> TcpConnection::close() {
  if (closed_) co_return;
  closed_ = true;
  reading_stopped_ = true;
  loop_.remove_deadline(read_deadline_);
  // Queued output first (a handler may write() and return at once), as long as the peer
  // keeps taking it; writers still suspended get their bytes sent too.
  co_await FlushAwaiter{*this};
  if (in_flight_ > 0) {
    // close(2) would not cancel a pending receive (PITFALLS #15): shut the socket down,
    // cancel everything on the fd, and wait for every CQE before the fd number is freed.
    ::shutdown(fd_.get(), SHUT_RDWR);
    (void)co_await io::cancel_fd(loop_, fd_.get());
    co_await DrainAwaiter{*this};
  }
  loop_.cancel_before_submit(send_hook_);
  if (!output_.empty()) fail_output();  // nothing in flight now: writers get their memory back
  (void)co_await io::close(loop_, fd_.release());
}

}  // namespace ucp
