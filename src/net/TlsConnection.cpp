#include "TlsConnection.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "ucp/base/Hook.h"
#include "ucp/io/Timer.h"

namespace ucp::detail {

namespace {

// The per-iteration handshake budget of this thread (one loop per thread). An iteration is
// known by the loop's clock reading, which changes at every poll.
bool claim_handshake_step(EventLoop& loop) noexcept {
  thread_local Clock::time_point iteration{};
  thread_local uint32_t used = 0;
  if (loop.now() != iteration) {
    iteration = loop.now();
    used = 0;
  }
  if (used >= TlsConnection::kHandshakeStepsPerIteration) return false;
  ++used;
  return true;
}

/// Resumes the caller in the next loop iteration, after that iteration's completions: a timer
/// due now fires once the loop has polled again.
class NextIteration : private TimerNode {
 public:
  explicit NextIteration(EventLoop& loop) noexcept
      : TimerNode(hook<&NextIteration::on_fire>), loop_(loop) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> caller) noexcept {
    caller_ = caller;
    loop_.add_timer(*this, loop_.now());
  }
  void await_resume() const noexcept {}

 private:
  friend HookAccess;
  void on_fire() noexcept { loop_.schedule(caller_); }
  EventLoop& loop_;
  std::coroutine_handle<> caller_;
};

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
    if (server && !input.empty()) {
      while (!claim_handshake_step(loop())) co_await NextIteration(loop());
    }
    auto step = session_.handshake(input);
    if (session_.has_output()) writer().request_send();
    if (!step) co_return Unexpected{step.error()};
    // What came behind the last handshake message (a client's first request) is the first
    // read's.
    if (step->consumed < input.size()) session_.keep(input.subspan(step->consumed));
    if (step->established) co_return Result<void>{};
    ciphertext.reset();
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

Spawned TlsConnection::fill(ReadAwaiter& awaiter) {
  BufferLease ciphertext;
  for (;;) {
    ReadAwaiter raw(reader(), &ciphertext, ReadAwaiter::RawTag{});
    filling_ = &raw;
    auto received = co_await raw;
    filling_ = nullptr;
    if (!received) {
      fill_error_ = received.error();
      break;
    }
    if (*received == 0) session_.peer_eof();  // decrypting nothing then reports the end
    decrypt(ciphertext.bytes());
    ciphertext.reset();
    if (plaintext_ready()) break;
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
