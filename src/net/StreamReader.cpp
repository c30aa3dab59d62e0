#include "ucp/net/detail/StreamReader.h"

#include <cassert>
#include <cerrno>

#include "ucp/io/detail/LoopAccess.h"

#include "TlsConnection.h"

namespace ucp::detail {

/// The one receive of a single-shot read, with its deadline; pooled, so that frames of
/// readers in multishot mode (the default) do not carry it.
struct StreamReader::ReadAwaiter::SingleShot {
  struct Receive : detail::Operation {
    ReadAwaiter* owner = nullptr;
  };
  Receive op;
  detail::LinkedTimeout timeout;
};

StreamReader::StreamReader(EventLoop& loop, int fd, uint32_t read_timeout_ms,
                           OnIdle on_idle) noexcept
    : MultishotRecv(loop, fd, on_idle),
      TimerNode(hook<&StreamReader::on_deadline>),
      timeout_ms_(read_timeout_ms),
      multishot_(loop.capabilities().multishot_receive) {}

StreamReader::~StreamReader() { assert(idle()); }

void StreamReader::notify_idle() noexcept {
  if (idle()) stream().notify_idle();
}

// ---- ReadAwaiter ----

StreamReader::ReadAwaiter::ReadAwaiter(StreamReader& reader,
                                       std::span<std::byte> destination) noexcept
    : reader_(reader), destination_(destination) {}

StreamReader::ReadAwaiter::ReadAwaiter(StreamReader& reader, BufferLease* lend_into) noexcept
    : reader_(reader), lease_(lend_into) {}

StreamReader::ReadAwaiter::ReadAwaiter(StreamReader& reader, BufferLease* lend_into,
                                       RawTag) noexcept
    : reader_(reader), lease_(lend_into), raw_(true) {}

StreamReader::ReadAwaiter::~ReadAwaiter() = default;

bool StreamReader::ReadAwaiter::await_ready() const noexcept {
  if (reader_.state_ != State::kOpen) return true;  // await_resume reports the stop
  if (reader_.tls_ && !raw_) {
    return (lease_ != nullptr || !destination_.empty()) &&
           TlsConnection::of(reader_).plaintext_ready();
  }
  return reader_.multishot_ && reader_.stream().has_data() &&
         (lease_ != nullptr || !destination_.empty());
}

bool StreamReader::ReadAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  caller_ = caller;
  StreamReader& r = reader_;
  if (lease_ == nullptr && destination_.empty()) {  // 0 must mean EOF and nothing else
    result_ = -EINVAL;
    return false;
  }
  if (r.tls_ && !raw_) {
    mode_ = Mode::kTls;
    TlsConnection::of(r).start_fill(*this);
    return true;
  }
  if (!r.multishot_) return start_single_shot();
  if (!r.stream().wait(caller)) return false;  // news already (EOF, an error)
  mode_ = Mode::kMultishot;
  r.waiting_ = this;
  if (r.timeout_ms_ > 0) {
    r.loop().add_timer(r.deadline(), r.loop().now() + std::chrono::milliseconds(r.timeout_ms_));
  }
  return true;
}

bool StreamReader::ReadAwaiter::start_single_shot() noexcept {
  StreamReader& r = reader_;
  std::span<std::byte> into = destination_;
  int32_t registered_index = -1;
  if (lease_ != nullptr) {
    // Borrowed for this read only: a registered buffer when the loop has one free.
    *lease_ = detail::LoopAccess::borrow_receive_buffer(r.loop());
    into = lease_->writable();
    registered_index = lease_->registered_index();
  }
  single_shot_ = make_pooled<SingleShot>();
  auto& op = single_shot_->op;
  op.owner = this;
  op.code = detail::OpCode::kRecv;
  op.fd = r.stream().fd();
  op.data = into.data();
  op.size = static_cast<uint32_t>(std::min<size_t>(into.size(), UINT32_MAX));
  op.buffer_index = registered_index;
  op.on_complete = &on_single_shot;
  if (r.timeout_ms_ > 0) {
    single_shot_->timeout.ms = r.timeout_ms_;
    op.timeout = &single_shot_->timeout;
  }
  if (!detail::LoopAccess::submit(r.loop(), op)) {
    result_ = op.result;
    single_shot_.reset();
    return false;
  }
  mode_ = Mode::kSingleShot;
  r.waiting_ = this;
  r.single_shot_in_flight_ = true;
  return true;
}

std::coroutine_handle<> StreamReader::ReadAwaiter::on_single_shot(detail::IoContext& context,
                                                                  int32_t res, uint32_t) noexcept {
  ReadAwaiter* self = static_cast<SingleShot::Receive&>(context).owner;
  StreamReader& r = self->reader_;
  self->result_ = res;
  r.single_shot_in_flight_ = false;
  if (r.waiting_ == self) r.waiting_ = nullptr;
  r.notify_idle();
  return self->caller_;
}

Result<size_t> StreamReader::ReadAwaiter::await_resume() noexcept {
  if (mode_ == Mode::kAbandoned) return Unexpected{std::errc::operation_canceled};
  StreamReader& r = reader_;
  if (r.tls_ && !raw_) return TlsConnection::of(r).finish_read(*this);
  Result<size_t> result = Unexpected{r.stop_reason_};
  if (mode_ == Mode::kSingleShot) {
    single_shot_.reset();
    int32_t res = result_;
    // A stop that cancelled this read reads as its reason (timed_out, operation_canceled).
    if (res == -ECANCELED && r.state_ != State::kOpen) res = -static_cast<int>(r.stop_reason_);
    result = bytes_from_cqe(res);
    if (lease_ != nullptr) {
      if (result && *result > 0) {
        lease_->set_size(*result);
      } else {
        lease_->reset();
      }
    }
  } else {
    if (mode_ == Mode::kMultishot) {
      if (r.waiting_ == this) r.waiting_ = nullptr;
      r.loop().cancel_timer(r.deadline());
    }
    auto& stream = r.stream();  // reached in multishot mode only (or with result_ < 0)
    if (result_ < 0) {
      result = bytes_from_cqe(result_);  // refused before anything was started
    } else if (r.state_ != State::kOpen) {
      // stopped: result already holds the reason
    } else if (stream.has_data()) {
      if (lease_ != nullptr) {
        *lease_ = stream.lend_front();
        result = lease_->size();
      } else {
        result = stream.copy_out(destination_);
      }
    } else if (stream.at_eof()) {
      result = size_t{0};  // the peer's FIN, and only that, reads as 0
    } else if (stream.error() != 0) {
      result = bytes_from_cqe(stream.error());
    }
  }
  if (result) r.bytes_read_ += *result;
  return result;
}

void StreamReader::ReadAwaiter::cancel() noexcept {
  if (mode_ == Mode::kAbandoned) return;  // ended already, and the reader may be gone
  StreamReader& r = reader_;
  if (mode_ == Mode::kTls) {
    TlsConnection::of(r).cancel_fill();  // its raw read ends; the fill resumes us
    return;
  }
  if (r.waiting_ != this) return;  // not waiting (any more)
  if (mode_ == Mode::kSingleShot) {
    detail::LoopAccess::cancel(r.loop(), single_shot_->op);  // its completion resumes us
    return;
  }
  // The stream's news has already made this reader ready (its resumption is queued in this
  // iteration): the data won the race, and a second resumption would run a finished frame.
  if (!r.stream().has_waiter()) return;
  r.waiting_ = nullptr;
  r.stream().drop_waiter();  // the stream keeps receiving for the next read
  r.loop().cancel_timer(r.deadline());
  result_ = -ECANCELED;
  r.loop().schedule(caller_);
}

bool StreamReader::ReadAwaiter::abandon() noexcept {
  if (!release()) return false;
  reader_.loop().schedule(caller_);
  return true;
}

bool StreamReader::ReadAwaiter::release() noexcept {
  StreamReader& r = reader_;
  if (mode_ != Mode::kMultishot || r.waiting_ != this || !r.stream().has_waiter()) return false;
  r.waiting_ = nullptr;
  r.stream().drop_waiter();  // the stream keeps receiving for the next reader
  r.loop().cancel_timer(r.deadline());
  mode_ = Mode::kAbandoned;
  return true;
}

// ---- stopping ----

void StreamReader::on_deadline() noexcept {
  if (waiting_ == nullptr || waiting_->mode_ != ReadAwaiter::Mode::kMultishot) return;
  stop(std::errc::timed_out);  // a timed-out connection reads no more
}

void StreamReader::stop(std::errc reason) noexcept {
  if (state_ != State::kOpen) return;
  state_ = State::kStopped;
  stop_reason_ = reason;
  loop().cancel_timer(deadline());
  ReadAwaiter* reader = std::exchange(waiting_, nullptr);
  // A multishot reader may be made ready already by news that came in this iteration (a
  // completion, before the timers and the coroutines that can call stop() run): it is resumed
  // once, by that, and reads `reason` all the same.
  const bool resumed_already = multishot_ && !stream().has_waiter();
  if (multishot_) stream().stop();  // drops a waiting reader without resuming it
  if (reader == nullptr) return;
  if (reader->mode_ == ReadAwaiter::Mode::kSingleShot) {
    // Its completion (-ECANCELED, or data that won the race) resumes it.
    detail::LoopAccess::cancel(loop(), reader->single_shot_->op);
  } else if (!resumed_already) {
    loop().schedule(reader->caller_);  // resumes now with `reason`
  }
}

}  // namespace ucp::detail
