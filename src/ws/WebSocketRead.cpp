// WebSocket's receive side: run(), the coroutine that reads, parses, answers control frames
// and closes for whoever receives, and advance(), its state machine. A server's run() also
// runs the handler.

#include <exception>
#include <new>
#include <utility>

#include "ucp/log/Logger.h"
#include "ucp/ws/WebSocket.h"

#include "FrameReader.h"
#include "Handshake.h"
#include "WebSocketExtras.h"
#include "WebSocketSend.h"

namespace ucp::ws {
namespace {

std::error_code error_for(uint16_t close_code) noexcept {
  switch (close_code) {
    case close_code::kProtocolError:
      return make_error_code(Errc::kProtocolError);
    case close_code::kInvalidPayload:
      return make_error_code(Errc::kInvalidPayload);
    case close_code::kMessageTooBig:
      return make_error_code(Errc::kMessageTooBig);
    default:
      return make_error_code(Errc::kClosed);
  }
}

}  // namespace

detail::FrameReader& WebSocket::reader() noexcept {
  return *std::launder(reinterpret_cast<detail::FrameReader*>(reader_storage_));
}

// ---- timers ----

void WebSocket::arm_timer(uint32_t ms) noexcept {
  tcp_.loop().add_timer(*this, tcp_.loop().now() + std::chrono::milliseconds(ms));
}

void WebSocket::note_activity() noexcept {
  ping_outstanding_ = false;
  if (state_ == State::kOpen && options_.ping_interval_ms > 0) arm_timer(options_.ping_interval_ms);
}

void WebSocket::on_timer(TimerNode& node) noexcept {
  WebSocket& ws = static_cast<WebSocket&>(node);
  if (ws.state_ == State::kClosed) return;
  if (ws.state_ == State::kClosing || ws.ping_outstanding_) {
    ws.timer_expired_ = true;  // the peer's close frame, or the answer to our ping, is late
  } else {
    ws.ping_due_ = true;  // quiet for ping_interval_ms: ask
  }
  // Wake the reading side if it waits for data; otherwise it looks at the flags when next run.
  if (ws.reading_ != nullptr) ws.reading_->cancel();
}

void WebSocket::cancel_receive() noexcept {
  if (!receiver_) return;
  cancel_requested_ = true;
  if (reading_ != nullptr) reading_->cancel();
}

// ---- receive ----

/// Where run() waits between receive() calls: it hands the result to the receiver, or starts
/// the server's handler, and is resumed by the next receive() (or the handler's return).
class WebSocket::Park {
 public:
  explicit Park(WebSocket& ws) noexcept : ws_(ws) {}
  bool await_ready() const noexcept { return ws_.receiver_ && !ws_.delivery_ready_; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> self) noexcept {
    ws_.runner_ = self;
    // The handler's return resumes us only while we are parked here.
    if (ws_.user_) ws_.user_.promise().continuation = self;
    if (ws_.delivery_ready_) {
      ws_.delivery_ready_ = false;
      return std::exchange(ws_.receiver_, {});
    }
    if (ws_.user_ && !ws_.user_started_) {
      ws_.user_started_ = true;
      return ws_.user_;
    }
    return std::noop_coroutine();
  }
  void await_resume() const noexcept {
    if (ws_.user_) ws_.user_.promise().continuation = {};
  }

 private:
  WebSocket& ws_;
};

bool WebSocket::ReceiveAwaiter::await_ready() noexcept {
  if (ws_.receiver_) {
    early_ = Early::kBusy;
    return true;
  }
  if (ws_.state_ == State::kClosed) {
    early_ = Early::kTerminal;
    return true;
  }
  return false;
}

std::coroutine_handle<> WebSocket::ReceiveAwaiter::await_suspend(
    std::coroutine_handle<> caller) noexcept {
  ws_.receiver_ = caller;
  if (!ws_.runner_) {
    // A client's first receive: its reading side starts now (a server's runs from the start).
    std::coroutine_handle<> runner;
    try {
      runner = run(&ws_, nullptr).release();
    } catch (const std::bad_alloc&) {
      ws_.receiver_ = {};
      early_ = Early::kNoMemory;
      return caller;
    }
    ws_.extras_->runner = runner;
    return runner;
  }
  return ws_.runner_;
}

Result<Message> WebSocket::ReceiveAwaiter::await_resume() noexcept {
  switch (early_) {
    case Early::kNone:
      break;
    case Early::kBusy:
      return Unexpected{make_error_code(Errc::kBusy)};
    case Early::kTerminal:
      return Unexpected{ws_.terminal_};
    case Early::kNoMemory:
      return Unexpected{make_error_code(std::errc::not_enough_memory)};
  }
  switch (std::exchange(ws_.delivery_, Delivery::kMessage)) {
    case Delivery::kTerminal:
      return Unexpected{ws_.terminal_};
    case Delivery::kCanceled:
      return Unexpected{make_error_code(std::errc::operation_canceled)};
    case Delivery::kMessage:
      break;
  }
  detail::FrameReader& r = ws_.reader();
  return Message{r.message_is_text() ? MessageKind::kText : MessageKind::kBinary, r.message()};
}

// Out of run(): what is not awaited stays out of its frame, which every connection keeps.

std::coroutine_handle<Task<>::promise_type> WebSocket::start_handler(WebSocket& ws,
                                                                     Handler& handler) noexcept {
  try {
    return handler(ws).release();
  } catch (const std::exception& e) {
    LOG_ERROR("ws {}: the handler could not start: {}", ws.tcp_.peer().to_string(), e.what());
  } catch (...) {
    LOG_ERROR("ws {}: the handler could not start", ws.tcp_.peer().to_string());
  }
  return {};
}

uint16_t WebSocket::handler_outcome(WebSocket& ws) noexcept {
  const std::exception_ptr failure = ws.user_.promise().exception;
  if (!failure) return close_code::kNormal;
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    LOG_ERROR("ws {}: handler failed: {}", ws.tcp_.peer().to_string(), e.what());
  } catch (...) {
    LOG_ERROR("ws {}: handler failed", ws.tcp_.peer().to_string());
  }
  return close_code::kInternalError;
}

void WebSocket::log_failure(WebSocket& ws, uint16_t code, const char* reason) noexcept {
  LOG_DEBUG("ws {}: failing the connection with {}: {}", ws.tcp_.peer().to_string(), code, reason);
}

void WebSocket::keep_close_reason(std::string_view reason) noexcept {
  if (reason.empty()) return;
  if (!extras_) extras_.reset(new (std::nothrow) detail::WebSocketExtras);
  if (!extras_) return;
  try {
    extras_->close_reason.assign(reason);
  } catch (const std::bad_alloc&) {
  }
}

/// run()'s read: into input_, which is empty meanwhile (an idle connection holds no buffer),
/// and handed to after_read() at once, so that no result stays in run()'s frame.
class WebSocket::Read {
 public:
  explicit Read(WebSocket& ws) noexcept : ws_(ws), read_(ws.tcp_.receive_into(ws.input_)) {
    ws.reading_ = &read_;
  }
  bool await_ready() const noexcept { return read_.await_ready(); }
  bool await_suspend(std::coroutine_handle<> self) noexcept { return read_.await_suspend(self); }
  void await_resume() noexcept { ws_.after_read(read_.await_resume()); }

 private:
  WebSocket& ws_;
  TcpConnection::ReadAwaiter read_;
};

/// Awaits control_task(step) and drops its result: whether the frame went out shows in the
/// connection's state.
class WebSocket::Sent {
 public:
  Sent(WebSocket& ws, Step step) : task_(ws.control_task(step)) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> self) noexcept { return task_.await_suspend(self); }
  void await_resume() { (void)task_.await_resume(); }

 private:
  Task<Result<void>> task_;
};

Task<> WebSocket::serve(const detail::ServerStart& start) { return run(nullptr, &start); }

Task<> WebSocket::run(WebSocket* ws, const detail::ServerStart* start) {
  // A server's WebSocket lives here, in the frame of its reading side.
  struct Owned {
    alignas(WebSocket) std::byte storage[sizeof(WebSocket)];
    bool live = false;
    ~Owned() {
      if (!live) return;
      auto* ws = std::launder(reinterpret_cast<WebSocket*>(storage));
      if (ws->user_) ws->user_.destroy();
      ws->~WebSocket();
    }
  } owned;
  if (ws == nullptr) {
    ws = ::new (owned.storage) WebSocket(*start->tcp, *start->options, Role::kServer,
                                         std::move(*start->received), start->negotiated, nullptr);
    owned.live = true;
    ws->user_ = start_handler(*ws, *start->handler);
    ws->finishing_ = !ws->user_;  // a server without a handler just closes
  }
  for (;;) {
    switch (const Step step = ws->advance()) {
      case Step::kPark:
        co_await Park(*ws);
        break;
      case Step::kRead:
        co_await Read(*ws);
        break;
      default:
        co_await Sent(*ws, step);
        if (step == Step::kFinish) co_return;
        break;
    }
  }
}

WebSocket::Step WebSocket::advance() noexcept {
  detail::FrameReader& r = reader();
  for (;;) {
    switch (phase_) {
      case Phase::kTop:
        if (finishing_) {
          phase_ = Phase::kEndOrRead;
          continue;
        }
        phase_ = Phase::kParked;
        return Step::kPark;
      case Phase::kParked:
        if (user_ && user_.done()) {
          // The handler returned: the connection closes (1011 if it threw).
          finishing_ = true;
          phase_ = Phase::kEndOrRead;
          if (state_ == State::kOpen) {
            close_code_ = handler_outcome(*this);
            arm_timer(options_.close_timeout_ms);
            return Step::kClose;
          }
          continue;
        }
        phase_ = receiver_ ? Phase::kEndOrRead : Phase::kTop;  // nothing asked for: park again
        continue;
      case Phase::kEndOrRead:
        if (finishing_ && state_ == State::kClosed) return Step::kFinish;
        // Read until there is something for the receiver (while finishing: until closed).
        phase_ = Phase::kRead;
        continue;
      case Phase::kRead:
        if (state_ == State::kClosed) {
          delivery_ = Delivery::kTerminal;
          phase_ = Phase::kDeliver;
          continue;
        }
        if (cancel_requested_) {
          cancel_requested_ = false;
          if (!finishing_) {
            delivery_ = Delivery::kCanceled;
            phase_ = Phase::kDeliver;
            continue;
          }
        }
        if (timer_expired_) {
          timer_expired_ = false;
          const bool closing = state_ == State::kClosing;
          // The peer did not answer our close frame, or our ping: give up on it, without
          // waiting for it any longer.
          end(closing ? close_code_ : close_code::kAbnormal,
              closing ? make_error_code(Errc::kClosed) : make_error_code(Errc::kPingTimeout));
          tcp_.shutdown_write();
          continue;
        }
        phase_ = Phase::kParse;
        if (ping_due_) {
          ping_due_ = false;
          if (state_ == State::kOpen) {
            ping_outstanding_ = true;
            arm_timer(options_.ping_timeout_ms);
            return Step::kPing;
          }
        }
        continue;
      case Phase::kParse: {
        auto event = detail::FrameReader::Event::kNeedMore;
        if (input_offset_ < input_.size()) {
          std::span<std::byte> input(input_.writable().data() + input_offset_,
                                     input_.size() - input_offset_);
          event = r.next(input);
          input_offset_ = static_cast<uint32_t>(input_.size() - input.size());
        }
        phase_ = Phase::kRead;
        switch (event) {
          case detail::FrameReader::Event::kMessage:
            if (state_ == State::kOpen && !finishing_) {
              delivery_ = Delivery::kMessage;
              phase_ = Phase::kDeliver;
            }
            continue;  // after our close frame, messages are dropped
          case detail::FrameReader::Event::kPing:
            if (state_ == State::kOpen) return Step::kPong;
            continue;
          case detail::FrameReader::Event::kPong:
            ping_outstanding_ = false;
            continue;
          case detail::FrameReader::Event::kClose:
            keep_close_reason(r.close_reason());
            // Answer with the same code (none if it had none), then end.
            phase_ = Phase::kAfterClose;
            if (state_ == State::kOpen) return Step::kAnswerClose;
            continue;
          case detail::FrameReader::Event::kError:
            log_failure(*this, r.error_code(), r.error_reason());
            phase_ = Phase::kAfterFail;
            if (state_ == State::kOpen) return Step::kFail;
            continue;
          case detail::FrameReader::Event::kNeedMore:
            break;
        }
        // Everything buffered is parsed: wait for more, holding no buffer meanwhile.
        input_.reset();
        input_offset_ = 0;
        r.release_buffers();
        return Step::kRead;
      }
      case Phase::kAfterClose:
        close_code_ = r.close_code();
        end(r.close_code(), make_error_code(Errc::kClosed));
        shut_down();
        phase_ = Phase::kRead;
        continue;
      case Phase::kAfterFail:
        end(r.error_code(), error_for(r.error_code()));
        shut_down();
        phase_ = Phase::kRead;
        continue;
      case Phase::kGoingAway:
        phase_ = Phase::kAfterGoingAway;
        return Step::kGoingAway;
      case Phase::kAfterGoingAway:
        end(close_code::kGoingAway, make_error_code(Errc::kClosed));
        tcp_.shutdown_write();
        phase_ = Phase::kRead;
        continue;
      case Phase::kDeliver:
        phase_ = Phase::kTop;
        if (finishing_) continue;
        cancel_requested_ = false;
        delivery_ready_ = true;
        continue;
    }
  }
}

void WebSocket::after_read(Result<size_t> read) noexcept {
  reading_ = nullptr;
  phase_ = Phase::kRead;
  if (!read) {
    input_.reset();
    const std::error_code error = read.error();
    if (error == std::errc::operation_canceled &&
        (ping_due_ || timer_expired_ || cancel_requested_)) {
      return;  // our own wake-up: the flags say why
    }
    if (error == std::errc::operation_canceled && state_ == State::kOpen) {
      // The server is stopping (its reads end): going away, politely.
      phase_ = Phase::kGoingAway;
      return;
    }
    end(close_code::kAbnormal, error);  // reset, write timeout...: no close frame
    return;
  }
  if (*read == 0) {  // the peer's FIN without (or after) a close frame
    end(close_code::kAbnormal, make_error_code(Errc::kClosed));
    tcp_.shutdown_write();
    return;
  }
  note_activity();
}

Task<Result<void>> WebSocket::control_task(Step step) {
  detail::FrameReader& r = reader();
  switch (step) {
    case Step::kClose:
      return send_close(close_code_, {});
    case Step::kPing:
      return send_control(0x9, {});
    case Step::kPong:
      return send_control(0xA, r.control_payload());
    case Step::kAnswerClose:
      return send_close(r.close_code(), {});
    case Step::kFail:
      return send_close(r.error_code(), r.error_reason());
    case Step::kGoingAway:
      return send_close(close_code::kGoingAway, {});
    default:
      return finish();
  }
}

Task<Result<void>> WebSocket::finish() {
  if (lingering_) co_await linger();
  co_await SendersDone(*this);  // their writes end: sent, or failed by the write timeout
  co_return Result<void>{};
}

}  // namespace ucp::ws
