// WebSocket: the connection. The reading side is one coroutine, run(), that parks between
// receive() calls and reads, parses, answers control frames and closes for whoever receives;
// a server's run() also runs the handler, so a connection is one frame for the WebSocket and
// its reading plus the handler's own (an idle one holds no buffer: the loop lends one per
// read). Sending needs no coroutine of its own: a frame that fits the output queue is queued
// in place, and only a frame that has to wait, be masked or be compressed takes one.
//
// Control passes by symmetric transfer: receive() hands over to run(), run() hands the result
// back, so a message costs no loop iteration beyond the read that brought it.

#include "ucp/ws/WebSocket.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include <sys/random.h>

#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"

#include "FrameReader.h"
#include "Handshake.h"
#include "Utf8Validator.h"
#include "WebSocketExtras.h"

namespace ucp::ws {
namespace {

/// Payloads up to this size are copied into the output queue with their header (no wait);
/// larger ones are sent from the caller's memory.
constexpr size_t kCopyLimit = 1024;

constexpr uint8_t opcode_of(MessageKind kind) noexcept {
  return kind == MessageKind::kText ? 0x1 : 0x2;
}

std::span<const std::byte> bytes(const std::byte* data, size_t size) noexcept {
  return {data, size};
}

/// Masking keys from getrandom(2), 64 at a time: RFC 6455 §10.3 asks for a strong source.
void random_mask(std::byte* key) noexcept {
  thread_local std::byte pool[256];
  thread_local size_t used = sizeof pool;
  if (used + 4 > sizeof pool) {
    size_t got = 0;
    while (got < sizeof pool) {
      const ssize_t n = ::getrandom(pool + got, sizeof pool - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    for (; got < sizeof pool; ++got) pool[got] = static_cast<std::byte>(got * 131 + 7);
    used = 0;
  }
  std::memcpy(key, pool + used, 4);
  used += 4;
}

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

// ---- turns: one frame at a time in the output queue ----

/// Waits for the turn to write a frame in pieces (FIFO); the turn is handed on by unlock().
class WebSocket::FrameLock {
 public:
  explicit FrameLock(WebSocket& ws) noexcept : ws_(ws) {}
  bool await_ready() noexcept {
    if (ws_.sending_) return false;
    ws_.sending_ = true;
    return true;
  }
  void await_suspend(std::coroutine_handle<> waiter) noexcept {
    // The waiters form a ring: the WebSocket points to the last, the last to the first.
    waiter_ = waiter;
    auto* last = static_cast<FrameLock*>(ws_.lock_tail_);
    if (last != nullptr) {
      next_ = last->next_;
      last->next_ = this;
    } else {
      next_ = this;
    }
    ws_.lock_tail_ = this;
  }
  void await_resume() const noexcept {}

  /// Passes the turn to the next waiter, or frees it.
  static void unlock(WebSocket& ws) noexcept {
    auto* last = static_cast<FrameLock*>(ws.lock_tail_);
    if (last == nullptr) {
      ws.sending_ = false;
      return;
    }
    FrameLock* next = last->next_;
    if (next == last) {
      ws.lock_tail_ = nullptr;
    } else {
      last->next_ = next->next_;
    }
    ws.tcp_.loop().schedule(next->waiter_);  // sending_ stays set: the turn is theirs
  }

 private:
  WebSocket& ws_;
  FrameLock* next_ = nullptr;
  std::coroutine_handle<> waiter_;
};

/// Counts a coroutine writing a frame: a server's WebSocket lives until the last is out, so a
/// coroutine of another connection (a chat room's broadcast) may be suspended in send() while
/// this connection ends.
class WebSocket::Sender {
 public:
  explicit Sender(WebSocket& ws) noexcept : ws_(ws) { ++ws_.senders_; }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  ~Sender() {
    if (--ws_.senders_ == 0 && ws_.senders_done_) {
      ws_.tcp_.loop().schedule(std::exchange(ws_.senders_done_, {}));
    }
  }

 private:
  WebSocket& ws_;
};

/// Where run() waits for the last Sender before the WebSocket goes.
class WebSocket::SendersDone {
 public:
  explicit SendersDone(WebSocket& ws) noexcept : ws_(ws) {}
  bool await_ready() const noexcept { return ws_.senders_ == 0; }
  void await_suspend(std::coroutine_handle<> self) noexcept { ws_.senders_done_ = self; }
  void await_resume() const noexcept {}

 private:
  WebSocket& ws_;
};

namespace {
struct Unlock {
  WebSocket& ws;
  void (*unlock)(WebSocket&) noexcept;
  ~Unlock() { unlock(ws); }
};
}  // namespace

// ---- construction ----

WebSocket::WebSocket(TcpConnection& tcp, const Options& options, Role role, BufferLease received,
                     const detail::Negotiated& negotiated,
                     std::unique_ptr<detail::WebSocketExtras> extras) noexcept
    : tcp_(tcp),
      options_(options),
      input_(std::move(received)),
      extras_(std::move(extras)),
      subprotocol_(negotiated.subprotocol),
      role_(role) {
  static_assert(sizeof(detail::FrameReader) <= kReaderBytes, "grow WebSocket::kReaderBytes");
  static_assert(alignof(detail::FrameReader) <= 8);
  auto* r = ::new (reader_storage_) detail::FrameReader(
      role == Role::kServer, {options.max_message_bytes, options.max_frame_bytes});
  if (negotiated.deflate) {
    if (!extras_) extras_.reset(new (std::nothrow) detail::WebSocketExtras);
    if (extras_) {
      extras_->deflate.reset(new (std::nothrow) detail::DeflateState(
          negotiated.deflate_params, options.deflate, role == Role::kServer));
      if (extras_->deflate) r->enable_inflate(&extras_->deflate->inflater);
    }
  }
  set_callback(&on_timer);
  if (options.ping_interval_ms > 0) arm_timer(options.ping_interval_ms);
}

WebSocket::~WebSocket() {
  tcp_.loop().cancel_timer(*this);
  if (extras_ && extras_->runner) extras_->runner.destroy();  // a client's reading side
  reader().~FrameReader();
}

detail::FrameReader& WebSocket::reader() noexcept {
  return *std::launder(reinterpret_cast<detail::FrameReader*>(reader_storage_));
}

std::string_view WebSocket::close_reason() const noexcept {
  return extras_ ? std::string_view(extras_->close_reason) : std::string_view();
}

std::string_view WebSocket::subprotocol() const noexcept {
  if (subprotocol_ >= options_.subprotocols.size()) return {};
  return options_.subprotocols[subprotocol_];
}

bool WebSocket::compressed() const noexcept { return extras_ && extras_->deflate; }

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

// ---- the end ----

void WebSocket::end(uint16_t code, std::error_code why) noexcept {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (close_code_ == 0 || code != close_code::kAbnormal) close_code_ = code;
  terminal_ = why;
  tcp_.loop().cancel_timer(*this);
  input_.reset();
  input_offset_ = 0;
}

void WebSocket::shut_down() noexcept {
  tcp_.shutdown_write();  // FIN once our last frames are out
  lingering_ = true;
}

Task<> WebSocket::linger() {
  // Read what the peer still sends until its FIN, so that closing does not reset our close
  // frame away (RFC 6455 §7.1.1: the server closes the TCP connection first, the client
  // follows); bounded, since a peer may never stop.
  lingering_ = false;
  const Clock::time_point due =
      tcp_.loop().now() + std::chrono::milliseconds(options_.close_timeout_ms);
  for (;;) {
    auto data = co_await with_deadline(tcp_.receive(), due);
    if (!data || data->empty()) break;
  }
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

// ---- send ----

WebSocket::SendAwaiter::~SendAwaiter() {
  if (path_ == Path::kSlow) slow_.~Task();
  if (path_ == Path::kBorrowed) borrowed_.~WriteAwaiter();
}

bool WebSocket::SendAwaiter::done(std::error_code error) noexcept {
  path_ = Path::kDone;
  ::new (&error_) std::error_code(error);  // data_'s room: no longer read
  return true;
}

bool WebSocket::SendAwaiter::await_ready() noexcept {
  WebSocket& ws = ws_;
  const std::span<const std::byte> data = data_;
  if (ws.state_ != State::kOpen) {
    return done(ws.state_ == State::kClosed ? ws.terminal_ : make_error_code(Errc::kClosed));
  }
  // The common case on a server: an unmasked, uncompressed frame that fits the queue now.
  const bool may_compress = ws.extras_ && ws.extras_->deflate &&
                            ws.extras_->deflate->deflater.usable() &&
                            data.size() >= ws.extras_->deflate->min_message_bytes;
  if (ws.sending_ || may_compress) return false;  // the slow path
  if (ws.role_ == Role::kClient) {
    // A small frame is masked on the stack and copied into the queue whole; a large one takes
    // the slow path, which masks it through a scratch block.
    if (data.size() > kCopyLimit) return false;
    std::byte frame[detail::kMaxFrameHeaderBytes + kCopyLimit];
    std::byte key[4];
    random_mask(key);
    const size_t n = detail::encode_frame_header(
        frame, static_cast<detail::Opcode>(opcode_of(kind_)), true, false, data.size(), key);
    if (!data.empty()) std::memcpy(frame + n, data.data(), data.size());
    uint32_t phase = 0;
    detail::apply_mask(std::span<std::byte>(frame + n, data.size()), key, phase);
    auto whole = ws.tcp_.write(std::span<const std::byte>(frame, n + data.size()));
    if (!whole.await_ready()) return false;  // the queue is full: wait in line
    return done(whole.await_resume().error());
  }
  std::byte header[detail::kMaxFrameHeaderBytes];
  const size_t n = detail::encode_frame_header(
      header, static_cast<detail::Opcode>(opcode_of(kind_)), true, false, data.size(), nullptr);
  {
    auto head = ws.tcp_.write(std::span<const std::byte>(header, n));
    if (!head.await_ready()) return false;  // the queue is full: wait in line
    if (auto queued = head.await_resume(); !queued) return done(queued.error());
  }
  if (data.size() <= kCopyLimit) {
    auto body = ws.tcp_.write(data);
    if (!body.await_ready()) {
      // The header is queued: the payload must follow it before any other frame.
      ws.sending_ = true;
      header_out_ = true;
      return false;
    }
    return done(body.await_resume().error());
  }
  // Large: sent from the caller's memory, behind the header (queued in this same step, so no
  // other frame can come between them).
  ::new (&borrowed_) TcpConnection::WriteAwaiter(ws.tcp_.write_all(data));
  path_ = Path::kBorrowed;
  return borrowed_.await_ready();
}

bool WebSocket::SendAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (path_ == Path::kBorrowed) {
    borrowed_.await_suspend(caller);
    return true;
  }
  const std::span<const std::byte> data = data_;
  try {
    ::new (&slow_) Task<Result<void>>(ws_.send_slow(kind_, data, header_out_));
  } catch (const std::bad_alloc&) {
    if (header_out_) FrameLock::unlock(ws_);
    return !done(make_error_code(std::errc::not_enough_memory));
  }
  path_ = Path::kSlow;
  return slow_.await_suspend(caller);  // false: it completed at once
}

Result<void> WebSocket::SendAwaiter::await_resume() noexcept {
  switch (path_) {
    case Path::kBorrowed:
      return borrowed_.await_resume();
    case Path::kSlow:
      return slow_.await_resume();
    case Path::kDone:
      if (error_) return Unexpected{error_};
      break;
    case Path::kPending:
      break;
  }
  return {};
}

Task<Result<void>> WebSocket::send_slow(MessageKind kind, std::span<const std::byte> data,
                                        bool header_out) {
  Sender counted(*this);
  if (!header_out) co_await FrameLock(*this);
  Unlock unlock{*this, &FrameLock::unlock};
  if (header_out) co_return co_await tcp_.write(data);  // the rest of a frame under way
  if (state_ != State::kOpen) {
    co_return Unexpected{state_ == State::kClosed ? terminal_ : make_error_code(Errc::kClosed)};
  }
  detail::MessageBuffer packed;  // compressed, and masked in place for a client
  std::span<const std::byte> payload = data;
  bool rsv1 = false;
  detail::DeflateState* deflate = extras_ ? extras_->deflate.get() : nullptr;
  if (deflate != nullptr && deflate->deflater.usable() &&
      data.size() >= deflate->min_message_bytes && deflate->deflater.compress(data, packed)) {
    payload = packed.bytes();
    rsv1 = true;
  }
  const bool masked = role_ == Role::kClient;
  std::byte key[4];
  if (masked) random_mask(key);
  std::byte header[detail::kMaxFrameHeaderBytes];
  const size_t n = detail::encode_frame_header(header, static_cast<detail::Opcode>(opcode_of(kind)),
                                               true, rsv1, payload.size(), masked ? key : nullptr);
  if (auto queued = co_await tcp_.write(bytes(header, n)); !queued) co_return queued;
  if (masked) {
    uint32_t phase = 0;
    if (rsv1) {
      detail::apply_mask(packed.bytes(), key, phase);
    } else {
      // Masked copies through a scratch block; each is queued before the next is made.
      constexpr size_t kPiece = 4096;
      if (!packed.reserve_more(std::min(payload.size(), kPiece))) {
        co_return Unexpected{std::errc::not_enough_memory};
      }
      for (size_t at = 0; at < payload.size();) {
        const size_t take = std::min(payload.size() - at, packed.capacity());
        std::memcpy(packed.spare().data(), payload.data() + at, take);
        const auto piece = packed.spare().first(take);
        detail::apply_mask(piece, key, phase);
        if (auto queued = co_await tcp_.write(piece); !queued) co_return queued;
        at += take;
      }
      co_return Result<void>{};
    }
  }
  if (payload.size() <= kCopyLimit) co_return co_await tcp_.write(payload);
  co_return co_await tcp_.write_all(payload);
}

Task<Result<void>> WebSocket::send_control(uint8_t opcode, std::span<const std::byte> payload) {
  // Built whole before the first suspension: `payload` may be the reader's, valid until then.
  std::byte frame[detail::kMaxFrameHeaderBytes + detail::kMaxControlPayload];
  const size_t length = std::min(payload.size(), detail::kMaxControlPayload);
  const bool masked = role_ == Role::kClient;
  std::byte key[4];
  if (masked) random_mask(key);
  const size_t n = detail::encode_frame_header(frame, static_cast<detail::Opcode>(opcode), true,
                                               false, length, masked ? key : nullptr);
  if (length > 0) std::memcpy(frame + n, payload.data(), length);
  if (masked) {
    uint32_t phase = 0;
    detail::apply_mask(std::span<std::byte>(frame + n, length), key, phase);
  }
  Sender counted(*this);
  co_await FrameLock(*this);
  Unlock unlock{*this, &FrameLock::unlock};
  co_return co_await tcp_.write(bytes(frame, n + length));
}

Task<Result<void>> WebSocket::send_close(uint16_t code, std::string_view reason) {
  state_ = State::kClosing;
  std::byte payload[detail::kMaxControlPayload];
  size_t n = 0;
  if (code != close_code::kNoStatus) {
    payload[0] = static_cast<std::byte>(code >> 8);
    payload[1] = static_cast<std::byte>(code & 0xFF);
    const size_t room = std::min(reason.size(), detail::kMaxControlPayload - 2);
    if (room > 0) std::memcpy(payload + 2, reason.data(), room);
    n = 2 + room;
  }
  co_return co_await send_control(0x8, bytes(payload, n));
}

Task<Result<void>> WebSocket::ping(std::span<const std::byte> payload) {
  if (payload.size() > detail::kMaxControlPayload)
    co_return Unexpected{std::errc::invalid_argument};
  if (state_ != State::kOpen) {
    co_return Unexpected{state_ == State::kClosed ? terminal_ : make_error_code(Errc::kClosed)};
  }
  co_return co_await send_control(0x9, payload);
}

Task<Result<void>> WebSocket::close(uint16_t code, std::string_view reason) {
  if (!detail::valid_close_code(code) || reason.size() > detail::kMaxControlPayload - 2 ||
      !detail::Utf8Validator::valid(std::as_bytes(std::span(reason.data(), reason.size())))) {
    co_return Unexpected{std::errc::invalid_argument};
  }
  if (state_ == State::kOpen) {
    std::byte payload[detail::kMaxControlPayload] = {static_cast<std::byte>(code >> 8),
                                                     static_cast<std::byte>(code & 0xFF)};
    if (!reason.empty()) std::memcpy(payload + 2, reason.data(), reason.size());
    state_ = State::kClosing;
    close_code_ = code;
    arm_timer(options_.close_timeout_ms);
    if (auto sent = co_await send_control(0x8, bytes(payload, 2 + reason.size())); !sent) {
      end(close_code::kAbnormal, sent.error());
      co_return sent;
    }
  }
  if (receiver_) co_return Result<void>{};  // that receive() sees the handshake through
  // Read (and drop) until the peer's close frame has come and the connection has ended.
  for (;;) {
    auto message = co_await receive();
    if (!message) break;
  }
  co_return Result<void>{};
}

}  // namespace ucp::ws
