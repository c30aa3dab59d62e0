#include "ucp/net/detail/StreamWriter.h"

#include <cassert>
#include <cerrno>

#include <sys/socket.h>

#include "ucp/io/detail/LoopAccess.h"
#include "ucp/tls/TlsSession.h"

#include "TlsConnection.h"

namespace ucp::detail {

// One queue, one send in flight. A write appends to the queue and asks for a send; the send
// starts from the loop's pre-submit hook, after every coroutine ready in this iteration has
// run, so all they wrote goes out as one operation (sent right there when the backend can
// without waiting: epoll, on a socket it knows is writable). Its completion drops the sent bytes,
// resumes the write_all() writers whose bytes are all out, lets suspended write() writers go
// on once the queue is down to half of max_output_bytes, and asks for the next send. Writers
// are only ever scheduled, never resumed inline, so no frame can end while the queue is
// being walked.

StreamWriter::StreamWriter(EventLoop& loop, int fd, OutputLimits limits, OnEvent on_event) noexcept
    : TimerNode(hook<&StreamWriter::on_deadline>),
      VectoredSend(loop, fd, hook<&StreamWriter::on_send_complete>),
      limits_(limits),
      on_event_(on_event) {
  detail::PreSubmitHook::run = hook<&StreamWriter::start_send>;
}

StreamWriter::~StreamWriter() {
  assert(idle());
  detail::LoopAccess::cancel_before_submit(loop(), send_hook());
}

// ---- WriteAwaiter ----

static_assert(sizeof(StreamWriter::WriteAwaiter) <= 56,
              "a WebSocket send holds one in every handler's frame: keep it small");

StreamWriter::WriteAwaiter::WriteAwaiter(StreamWriter& writer, std::span<const std::byte> bytes,
                                         Mode mode) noexcept
    : OutputSegment{.data = bytes.data(), .size = bytes.size()},
      mode_(mode),
      writer_(writer),
      error_() {}

bool StreamWriter::WriteAwaiter::await_ready() noexcept {
  StreamWriter& w = writer_;
  if (w.error_) {
    error_ = w.error_;
    return true;
  }
  if (w.state_ == State::kClosing) {
    error_ = make_error_code(std::errc::operation_canceled);
    return true;
  }
  if (w.state_ == State::kShut) {
    error_ = make_error_code(std::errc::broken_pipe);
    return true;
  }
  if (size == 0) return true;
  if (mode_ == Mode::kBuffered && !w.full_ &&
      w.queue_.size() + size <= w.limits_.max_output_bytes) {
    w.queue_.append_copy({data, size});
    w.request_send();
    return true;
  }
  return false;
}

void StreamWriter::WriteAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  StreamWriter& w = writer_;
  ::new (&caller_) std::coroutine_handle<>(caller);  // error_ is empty: its room is free
  // A write() that does not fit waits like write_all() but may be copied, and so resumed,
  // as soon as the queue has drained to half; until then every write() waits behind it.
  kind = mode_ == Mode::kBuffered ? SegmentKind::kAdoptable : SegmentKind::kBorrowed;
  partly_sent = false;
  if (mode_ == Mode::kBuffered) w.full_ = true;
  w.queue_.append_borrowed(*this);
  queued_ = true;
  w.request_send();
}

Result<void> StreamWriter::WriteAwaiter::await_resume() const noexcept {
  if (error_) return Unexpected{error_};
  return {};
}

// ---- sending ----

void StreamWriter::request_send() noexcept {
  if (!send().in_flight() && (!queue_.empty() || (tls_ && tls_pending())))
    detail::LoopAccess::run_before_submit(loop(), send_hook());
}

void StreamWriter::start_send() noexcept {
  if (tls_) {
    start_tls_send();
    return;
  }
  if (send().in_flight() || queue_.empty()) return;
  if (error_) {  // e.g. the deadline passed while this send waited for the hook
    drop_queue();
    return;
  }
  iovec buffers[detail::VectoredSend::kMaxBuffers];
  const size_t count = queue_.gather(buffers, &in_flight_last_);
  const auto started = send().start({buffers, count});
  if (!started) {
    fail(started.error());  // loop closing, or no submission room
    return;
  }
  ++sends_submitted_;
  if (*started) {  // sent already (a backend that could without waiting): no deadline needed
    on_send_complete(**started);  // last: it may free `this`
    return;
  }
  if (!deadline().armed()) arm_deadline();
}

void StreamWriter::arm_deadline() noexcept {
  const uint32_t timeout_ms =
      state_ == State::kClosing ? limits_.close_flush_timeout_ms : limits_.write_timeout_ms;
  if (tls_ && drained()) {
    // Nothing to send: the node times the connection's quiet instead (TlsConnection, "record
    // buffers"). Moving it later, as every drained send does, is O(1).
    quiet_timer_ = true;
    loop().add_timer(deadline(), loop().now() + TlsConnection::kBuffersQuiet);
    return;
  }
  if (drained() || timeout_ms == 0) {
    // A quiet timer may run on while a send with no deadline is out: freeing the record
    // buffers then is harmless (the ciphertext in flight is the session's, not OpenSSL's).
    if (!quiet_timer_) loop().cancel_timer(deadline());
    return;
  }
  quiet_timer_ = false;
  loop().add_timer(deadline(), loop().now() + std::chrono::milliseconds(timeout_ms));
}

void StreamWriter::on_send_complete(int32_t res) noexcept {
  if (res > 0) {
    bytes_written_ += static_cast<uint64_t>(res);
    const size_t done_bytes = tls_ ? tls_sent(static_cast<size_t>(res)) : static_cast<size_t>(res);
    for (OutputSegment* done = queue_.consume(done_bytes); done != nullptr;) {
      OutputSegment* following = done->next;
      finish_writer(*done, {});
      done = following;
    }
    arm_deadline();  // progress: the peer gets another full timeout
  } else if (!error_) {
    // 0 bytes of a non-empty send: the peer is gone.
    error_ = error_from_errno(res == 0 ? EPIPE : -res);
  }
  if (cancels_pending_ && !error_) settle_cancels();
  if (error_) {
    drop_queue();
  } else {
    release_waiting_writers();
    if (!drained()) {
      request_send();
    } else if (tls_ && state_ != State::kOpen && queue_close_notify()) {
      request_send();  // close_notify before the FIN, and before close() goes on
    } else {
      if (state_ == State::kShut) ::shutdown(send().fd(), SHUT_WR);
      wake_flush_waiter();
    }
  }
  // Last: it may resume close(), after which `this` may be freed.
  if (on_event_ && idle()) on_event_(*this, Event::kIdle);
}

void StreamWriter::release_waiting_writers() noexcept {
  if (!full_ || queue_.size() > limits_.max_output_bytes / 2) return;
  full_ = false;
  for (OutputSegment* adopted = queue_.adopt_waiting(); adopted != nullptr;) {
    OutputSegment* following = adopted->next;
    finish_writer(*adopted, {});
    adopted = following;
  }
}

void StreamWriter::fail(std::error_code error) noexcept {
  if (error_) return;
  error_ = error;
  if (send().in_flight()) {
    send().cancel();  // its completion drops the queue and resumes the writers with error_
  } else {
    drop_queue();
  }
  wake_flush_waiter();
}

void StreamWriter::drop_queue() noexcept {
  // Only with no send in flight: the writers' memory is theirs again.
  assert(!send().in_flight());
  if (!error_) error_ = make_error_code(std::errc::operation_canceled);
  if (tls_) TlsConnection::of(*this).sealed_ = 0;  // its writers get the error below
  for (OutputSegment* dropped = queue_.clear(); dropped != nullptr;) {
    OutputSegment* following = dropped->next;
    finish_writer(*dropped, error_);
    dropped = following;
  }
  full_ = false;
  loop().cancel_timer(deadline());
  wake_flush_waiter();
}

void StreamWriter::WriteAwaiter::finish(std::error_code error) noexcept {
  const std::coroutine_handle<> caller = caller_;
  ::new (&error_) std::error_code(error);  // caller_'s room: read above
  queued_ = false;
  cancel_requested_ = false;
  writer_.loop().schedule(caller);
}

void StreamWriter::finish_writer(OutputSegment& segment, std::error_code error) noexcept {
  WriteAwaiter::of(segment).finish(error);
}

void StreamWriter::cancel_writer(WriteAwaiter& writer) noexcept {
  if (!writer.queued_ || writer.cancel_requested_) return;  // not waiting (any more)
  if (writer.partly_sent) {
    // Part of it is sent: the stream cannot lose the rest quietly.
    fail(make_error_code(std::errc::operation_canceled));
    return;
  }
  // On TLS, sealed bytes are as good as in flight: their ciphertext is on its way.
  const bool covered = send().in_flight() || (tls_ && TlsConnection::of(*this).sealed_ > 0);
  const OutputSegment* in_flight_until = covered ? in_flight_last_ : nullptr;
  if (queue_.remove(writer, in_flight_until)) {
    writer.finish(make_error_code(std::errc::operation_canceled));
    if (drained()) loop().cancel_timer(deadline());
    return;
  }
  // The send in flight covers it, though maybe not a byte of it will go: decide when it ends.
  writer.cancel_requested_ = true;
  cancels_pending_ = true;
}

void StreamWriter::settle_cancels() noexcept {
  // Called with no send in flight: every segment can be examined and unlinked. On TLS, not
  // while sealed bytes are still on their way (the next completion settles them).
  if (tls_ && TlsConnection::of(*this).sealed_ > 0) return;
  cancels_pending_ = false;
  for (OutputSegment* segment = queue_.first(); segment != nullptr;) {
    OutputSegment* following = segment->next;
    if (segment->kind != SegmentKind::kChunk) {
      WriteAwaiter& writer = WriteAwaiter::of(*segment);
      if (writer.cancel_requested_) {
        writer.cancel_requested_ = false;
        if (writer.partly_sent) {  // partly sent meanwhile
          fail(make_error_code(std::errc::operation_canceled));
          return;
        }
        queue_.remove(*segment, nullptr);
        finish_writer(*segment, make_error_code(std::errc::operation_canceled));
      }
    }
    segment = following;
  }
  if (drained()) loop().cancel_timer(deadline());
}

void StreamWriter::wake_flush_waiter() noexcept {
  if (flush_waiter_) loop().schedule(std::exchange(flush_waiter_, {}));
}

void StreamWriter::on_deadline() noexcept {
  if (quiet_timer_) {
    quiet_timer_ = false;
    tls_warmth_ = 0;
    TlsConnection::of(*this).release_buffers();
    return;
  }
  // The peer took nothing for the whole timeout: give up on the output.
  if (drained() || error_) return;
  fail(make_error_code(std::errc::timed_out));
  if (on_event_) on_event_(*this, Event::kTimedOut);
}

// ---- shutdown and close ----

void StreamWriter::shutdown_write() noexcept {
  if (state_ != State::kOpen) return;
  state_ = State::kShut;
  if (!drained()) return;  // when the last send completes
  if (tls_ && queue_close_notify()) {
    request_send();  // the FIN follows it
    return;
  }
  ::shutdown(send().fd(), SHUT_WR);
}

StreamWriter::FlushAwaiter StreamWriter::close_and_flush() noexcept {
  state_ = State::kClosing;
  if (tls_ && !error_ && drained() && queue_close_notify()) request_send();
  arm_deadline();  // from now on the close timeout bounds the wait
  return FlushAwaiter(*this);
}

bool StreamWriter::FlushAwaiter::await_ready() const noexcept {
  return writer_.drained() || writer_.failed();
}

void StreamWriter::FlushAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  writer_.flush_waiter_ = caller;
}

void StreamWriter::abandon() noexcept {
  detail::LoopAccess::cancel_before_submit(loop(), send_hook());
  loop().cancel_timer(deadline());
  if (!queue_.empty()) drop_queue();
}

}  // namespace ucp::detail

// ---- TLS ----

namespace ucp::detail {

bool StreamWriter::tls_pending() const noexcept {
  const TlsConnection& t = TlsConnection::of(*this);
  return t.sealed_ > 0 || t.session().has_output();
}

// The send of a TLS connection: what the session has to send first (handshake messages,
// alerts, the rest of the records of the last seal), else the queued plaintext sealed now,
// at most kSealBytes of it. Its writers are done when that ciphertext is all sent (tls_sent).
void StreamWriter::start_tls_send() noexcept {
  if (send().in_flight()) return;
  TlsConnection& t = TlsConnection::of(*this);
  tls::TlsSession& session = t.session();
  if (error_) {
    if (!queue_.empty()) drop_queue();
    return;
  }
  if (!session.has_output() && t.sealed_ == 0 && !queue_.empty() && session.established() &&
      !session.closed()) {
    iovec buffers[detail::VectoredSend::kMaxBuffers];
    const size_t gathered = queue_.gather(buffers);
    size_t count = 0;
    size_t total = 0;
    while (count < gathered && total < kSealBytes) total += buffers[count++].iov_len;
    queue_.gather({buffers, count}, &in_flight_last_);  // names the last segment sealed from
    if (total > kSealBytes) buffers[count - 1].iov_len -= total - kSealBytes;
    auto sealed = session.write({buffers, count});
    if (!sealed) {
      fail(sealed.error());
      return;
    }
    t.sealed_ = *sealed;
  }
  if (!session.has_output()) return;
  iovec buffers[detail::VectoredSend::kMaxBuffers];
  const size_t count = session.gather_output(buffers);
  const auto started = send().start({buffers, count});
  if (!started) {
    fail(started.error());
    return;
  }
  ++sends_submitted_;
  if (*started) {
    on_send_complete(**started);  // last: it may free `this`
    return;
  }
  if (!deadline().armed() || quiet_timer_) arm_deadline();
}

size_t StreamWriter::tls_sent(size_t bytes) noexcept {
  TlsConnection& t = TlsConnection::of(*this);
  t.session().consume_output(bytes);
  if (t.session().has_output()) return 0;
  return std::exchange(t.sealed_, 0);  // every record of the seal is out: its writers are done
}

bool StreamWriter::queue_close_notify() noexcept {
  tls::TlsSession& session = TlsConnection::of(*this).session();
  if (session.closed() || !session.established()) return false;
  session.close();
  return session.has_output();
}

}  // namespace ucp::detail
