#include "TlsConnection.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "ucp/base/Hook.h"
#include "ucp/io/Timer.h"

namespace ucp::detail {

namespace {

class HandshakeTurn;

/// The server handshake steps of this thread's loop (one loop per thread): at most
/// kHandshakeStepsPerIteration per loop iteration, granted in arrival order. The order
/// matters: the reads that bring new ClientHellos complete before a waiting step's timer
/// fires in the same iteration, so without a queue a storm of new connections would take every
/// iteration's step and the handshakes that waited would wait until their timeout.
class HandshakeTurns {
 public:
  /// A step now, for a handshake that holds no place in the queue: only when no handshake
  /// waits and this iteration's budget has room.
  bool try_claim(EventLoop& loop) noexcept { return head_ == nullptr && claim(loop); }
  void join(HandshakeTurn& turn) noexcept;
  void leave(HandshakeTurn& turn) noexcept;
  /// The head's timer fired (an iteration later than it was armed): grants the budget's steps
  /// to the waiters in order, and arms the next head's timer when some wait on.
  void serve(EventLoop& loop) noexcept;

 private:
  bool claim(EventLoop& loop) noexcept {
    // An iteration is known by the loop's clock reading, which changes at every poll.
    if (loop.now() != iteration_) {
      iteration_ = loop.now();
      used_ = 0;
    }
    if (used_ >= TlsConnection::kHandshakeStepsPerIteration) return false;
    ++used_;
    return true;
  }
  void arm_head() noexcept;

  HandshakeTurn* head_ = nullptr;
  HandshakeTurn* tail_ = nullptr;
  Clock::time_point iteration_{};
  uint32_t used_ = 0;
};

HandshakeTurns& handshake_turns() noexcept {
  thread_local HandshakeTurns turns;
  return turns;
}

/// A place in the thread's queue of handshake steps, awaited until the step is granted. Only
/// the head's timer is armed (it fires after the next poll), so a thousand
/// waiting handshakes cost the loop one timer per iteration, not a thousand.
class HandshakeTurn : private TimerNode {
 public:
  explicit HandshakeTurn(EventLoop& loop) noexcept
      : TimerNode(hook<&HandshakeTurn::on_fire>), loop_(loop) {}
  HandshakeTurn(const HandshakeTurn&) = delete;
  HandshakeTurn& operator=(const HandshakeTurn&) = delete;
  /// A connection closed while its handshake waits gives its place up.
  ~HandshakeTurn() {
    if (queued_) handshake_turns().leave(*this);
  }

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> caller) noexcept {
    caller_ = caller;
    handshake_turns().join(*this);
  }
  void await_resume() const noexcept {}

 private:
  friend HookAccess;
  friend class HandshakeTurns;
  void on_fire() noexcept { handshake_turns().serve(loop_); }
  // Due just after this iteration's clock reading: a timer armed while the loop fires its due
  // timers must not fire in the same pass (it would be served again, in a loop).
  void arm() noexcept { loop_.add_timer(*this, loop_.now() + Clock::duration{1}); }
  void disarm() noexcept { loop_.cancel_timer(*this); }

  EventLoop& loop_;
  std::coroutine_handle<> caller_;
  HandshakeTurn* next_ = nullptr;
  HandshakeTurn* prev_ = nullptr;
  bool queued_ = false;
};

void HandshakeTurns::join(HandshakeTurn& turn) noexcept {
  turn.queued_ = true;
  turn.prev_ = tail_;
  turn.next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = &turn;
  } else {
    head_ = &turn;
  }
  tail_ = &turn;
  if (head_ == &turn) turn.arm();
}

void HandshakeTurns::leave(HandshakeTurn& turn) noexcept {
  const bool was_head = head_ == &turn;
  if (turn.prev_ != nullptr) turn.prev_->next_ = turn.next_;
  if (turn.next_ != nullptr) turn.next_->prev_ = turn.prev_;
  if (head_ == &turn) head_ = turn.next_;
  if (tail_ == &turn) tail_ = turn.prev_;
  turn.next_ = turn.prev_ = nullptr;
  turn.queued_ = false;
  turn.disarm();
  if (was_head) arm_head();
}

void HandshakeTurns::serve(EventLoop& loop) noexcept {
  while (head_ != nullptr && claim(loop)) {
    HandshakeTurn& granted = *head_;
    const std::coroutine_handle<> caller = granted.caller_;
    leave(granted);  // arms the next head, which fires after the next poll
    loop.schedule(caller);
  }
  arm_head();  // the budget ran out with handshakes waiting: the head tries next iteration
}

void HandshakeTurns::arm_head() noexcept {
  if (head_ != nullptr && !head_->armed()) head_->arm();
}

/// Stops the connection's reads when the handshake takes too long; the raw read in progress
/// then ends with timed_out.
class HandshakeDeadline : private TimerNode {
 public:
  HandshakeDeadline(StreamReader& reader, uint32_t timeout_ms) noexcept
      : TimerNode(hook<&HandshakeDeadline::on_fire>), reader_(reader) {
    if (timeout_ms > 0) {
      reader.loop().add_timer(*this, reader.loop().now() + std::chrono::milliseconds(timeout_ms));
    }
  }
  bool passed() const noexcept { return passed_; }

 private:
  friend HookAccess;
  void on_fire() noexcept {
    passed_ = true;
    reader_.stop(std::errc::timed_out);
  }
  StreamReader& reader_;
  bool passed_ = false;
};

}  // namespace

TlsConnection::TlsConnection(EventLoop& loop, UniqueFd fd, InetAddress peer,
                             uint32_t read_timeout_ms, OutputLimits output_limits,
                             tls::TlsSession session) noexcept
    : TcpConnection(loop, std::move(fd), peer, read_timeout_ms, output_limits),
      session_(std::move(session)) {
  reader().tls_ = true;
  writer().tls_ = true;
  tls_object_ = true;
}

TlsConnection::~TlsConnection() = default;

bool TlsConnection::drop_tls() noexcept {
  if (writer().send().in_flight()) return false;
  if (std::exchange(writer().quiet_timer_, false)) loop().cancel_timer(writer().deadline());
  session_.consume_output(session_.output_size());
  sealed_ = 0;
  reader().tls_ = false;
  writer().tls_ = false;
  return true;
}

// ---- handshake ----

Task<Result<void>> TlsConnection::handshake(uint32_t timeout_ms) {
  const HandshakeDeadline deadline(reader(), timeout_ms);
  const bool server = session_.is_server();
  BufferLease ciphertext;
  std::span<const std::byte> input;
  for (;;) {
    // A server's steps with input do the work (the ClientHello's signature and key exchange):
    // one per iteration of this thread's loop.
    if (server && !input.empty() && !handshake_turns().try_claim(loop())) {
      co_await HandshakeTurn(loop());
      if (deadline.passed()) {
        co_return Unexpected{tls::make_error_code(tls::Errc::kHandshakeTimeout)};
      }
    }
    auto step = session_.handshake(input);
    if (session_.has_output()) writer().request_send();
    if (!step) co_return Unexpected{step.error()};
    // What came behind the last handshake message (a client's first request) is the first
    // read's.
    if (step->consumed < input.size()) session_.keep(input.subspan(step->consumed));
    if (step->established) co_return Result<void>{};
    ciphertext.reset();
    // A peer may take its time between flights (or never answer): wait without the buffers.
    session_.release_buffers();
    auto received = co_await ReadAwaiter(reader(), &ciphertext, ReadAwaiter::RawTag{});
    if (!received) {
      if (deadline.passed() || received.error() == std::errc::timed_out) {
        co_return Unexpected{tls::make_error_code(tls::Errc::kHandshakeTimeout)};
      }
      co_return Unexpected{received.error()};
    }
    if (*received == 0) session_.peer_eof();  // the next step reports the truncation
    input = ciphertext.bytes();
  }
}

// ---- reading ----

// Record buffers. OpenSSL allocates a read and a write buffer (about 17 KiB each) for a record;
// SSL_MODE_RELEASE_BUFFERS frees them after every record, which costs a busy connection an
// allocation and a free each way per message (6 % of a 4 KiB WebSocket echo's CPU). Freeing
// them whenever a read waits for the peer would cost the same: a request-answer connection
// waits after every answer. So a connection that keeps coming back (two receives within
// kBuffersQuiet of its last activity) keeps them until it has been quiet for kBuffersQuiet:
// no send drained and no receive began waiting since; the others free them as they wait. The
// writer's deadline node times the quiet while nothing is to be sent
// (StreamWriter::arm_deadline), and its padding holds the count, so the policy costs a
// connection no byte; an idle connection holds no buffer, as before.

void TlsConnection::decrypt(std::span<const std::byte> ciphertext) noexcept {
  try {
    for (;;) {
      if (plaintext_.source() == BufferLease::Source::kNone) {
        plaintext_ = BufferLease::from_pool(kPlaintextBytes);
      }
      const std::span<std::byte> room = plaintext_.writable().subspan(plaintext_.size());
      if (room.empty()) {
        session_.keep(ciphertext);  // the next read decrypts it
        break;
      }
      auto step = session_.read(ciphertext, room);
      if (!step) break;  // the session failed: failure() says why
      plaintext_.set_size(plaintext_.size() + step->plaintext);
      ciphertext = ciphertext.subspan(step->consumed);
      if (step->peer_closed) break;
      if (step->consumed == 0 && step->plaintext == 0) {
        session_.keep(ciphertext);
        break;
      }
      // Out of input: done, unless the session still holds plaintext (a record larger than
      // the room) and there is room left.
      if (ciphertext.empty() && (step->plaintext == 0 || !session_.has_buffered_input())) break;
    }
  } catch (const std::bad_alloc&) {
    failure_ = make_error_code(std::errc::not_enough_memory);
  }
  if (plaintext_.empty()) plaintext_.reset();  // an idle connection holds no block
  // Reading may have produced output: an answer to a KeyUpdate, an alert.
  if (session_.has_output()) writer().request_send();
}

bool TlsConnection::plaintext_ready() noexcept {
  if (plaintext_.empty() && session_.has_buffered_input()) decrypt({});
  // Ciphertext the multishot receive has queued already: no need to wait for it.
  MultishotRecv& stream = reader().stream();
  while (!settled() && reader().multishot_ && stream.has_data()) {
    BufferLease ciphertext = stream.lend_front();
    reader().bytes_read_ += ciphertext.size();
    decrypt(ciphertext.bytes());
  }
  return settled();
}

void TlsConnection::start_fill(ReadAwaiter& awaiter) { loop().spawn(fill(awaiter)); }

/// One raw read of the fill, and what it brought decrypted, as one awaiter: its result is
/// whether the fill is done. Nothing but the read itself is kept (the connection and the
/// ciphertext's lease are the read's own), and no local of the fill's frame, which every idle
/// connection holds, keeps the read's result.
struct TlsConnection::FillStep {
  // Receives that must come within the quiet time before a wait keeps the buffers: a
  // connection that answers one request and idles (the first comes right after the handshake)
  // never holds them while it waits.
  static constexpr uint8_t kWarm = 2;
  ReadAwaiter raw;

  FillStep(TlsConnection& connection, BufferLease& into) noexcept
      : raw(connection.reader(), &into, ReadAwaiter::RawTag{}) {}
  TlsConnection& self() const noexcept { return TlsConnection::of(raw.reader_); }
  bool await_ready() noexcept {
    self().filling_ = &raw;
    return raw.await_ready();
  }
  bool await_suspend(std::coroutine_handle<> caller) noexcept {
    if (!raw.await_suspend(caller)) return false;
    // Waiting for the peer. A connection not yet seen coming back within the quiet time waits
    // without the buffers; for every connection the quiet starts now (unless a send is out).
    StreamWriter& writer = self().writer();
    if (writer.tls_warmth_ < kWarm) self().release_buffers();
    if (writer.drained()) writer.arm_deadline();
    return true;
  }
  bool await_resume() noexcept {
    TlsConnection& connection = self();
    connection.filling_ = nullptr;
    StreamWriter& writer = connection.writer();
    if (writer.quiet_timer_ && writer.deadline().armed() && writer.tls_warmth_ < kWarm) {
      ++writer.tls_warmth_;  // came back while the quiet timer ran
    }
    auto received = raw.await_resume();
    if (!received) {
      connection.fill_error_ = received.error();
      return true;
    }
    if (*received == 0) connection.session_.peer_eof();  // decrypting nothing reports the end
    connection.decrypt(raw.lease_->bytes());
    raw.lease_->reset();
    return connection.plaintext_ready();
  }
};

Spawned TlsConnection::fill(ReadAwaiter& awaiter) {
  BufferLease ciphertext;
  while (!co_await FillStep(*this, ciphertext)) {
  }
  reader().loop().schedule(awaiter.caller_);
}

void TlsConnection::cancel_fill() noexcept {
  if (filling_ != nullptr) filling_->cancel();
}

Result<size_t> TlsConnection::finish_read(ReadAwaiter& awaiter) noexcept {
  if (awaiter.result_ < 0) return bytes_from_cqe(awaiter.result_);  // refused before any I/O
  const bool filled = awaiter.mode_ == ReadAwaiter::Mode::kTls;
  awaiter.mode_ = ReadAwaiter::Mode::kImmediate;
  const std::error_code fill_error = filled ? std::exchange(fill_error_, {}) : std::error_code();
  if (reader().stopped()) return Unexpected{reader().stop_reason_};
  if (fill_error) return Unexpected{fill_error};
  if (!plaintext_.empty()) {
    if (awaiter.lease_ != nullptr) {
      *awaiter.lease_ = std::move(plaintext_);
      return awaiter.lease_->size();
    }
    const size_t n = std::min(awaiter.destination_.size(), plaintext_.size());
    std::memcpy(awaiter.destination_.data(), plaintext_.bytes().data(), n);
    plaintext_.consume(n);
    if (plaintext_.empty()) plaintext_.reset();
    return n;
  }
  if (failure_) return Unexpected{failure_};
  if (session_.failed()) return Unexpected{session_.failure()};
  if (awaiter.lease_ != nullptr) awaiter.lease_->reset();
  return size_t{0};  // close_notify: the peer's end of the stream
}

}  // namespace ucp::detail
