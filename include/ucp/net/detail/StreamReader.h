#pragma once
// StreamReader: the input side of a TcpConnection. It serves read() (copy into the caller's
// buffer) and receive() (a lent buffer) in one of two ways, chosen by the loop:
//
// - multishot (the loop has receive buffers, LoopCapabilities::multishot_receive): one
//   long-lived receive queues chunks (io/detail/MultishotRecv.h) and a read returns queued bytes
//   without suspending. The read timeout is a loop timer pushed back on every read (O(1)),
//   because a deadline linked to the receive would end it.
// - single-shot: one receive per read, straight into the caller's buffer (receive(): into a
//   buffer the loop lends, registered when it has one free) with a deadline linked to it.
//
// Either way a read returns data, 0 for the peer's FIN and nothing else, or an error:
// timed_out (read_timeout_ms without data), operation_canceled (stop() or the connection
// closing), connection_reset, ... Pauses of the multishot receive never show.
//
// On a TLS connection (TlsConnection, src/net) the bytes received are ciphertext: a read then
// returns plaintext that the connection decrypts from them, and 0 only after the peer's
// close_notify (its EOF without one is an error of the tls category, truncated). Raw reads
// (RawTag) are the connection's own, for the ciphertext.
//
// Thread contract: the connection's loop thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Timer.h"
#include "ucp/io/detail/MultishotRecv.h"
#include "ucp/io/detail/Operation.h"
#include "ucp/memory/MemoryPool.h"

namespace ucp::detail {

class TlsConnection;

// The multishot stream and the read timeout's timer node are private bases rather than members
// pointing back here (their callbacks find the reader with ucp/base/Hook.h): every connection
// carries a reader, and the timer node's tail padding holds the small fields below.
class StreamReader : private MultishotRecv, private TimerNode {
 public:
  /// Runs whenever the reader's last operation in flight has completed. Its owner holds the
  /// reader as a base and makes it with hook<&Owner::f, StreamReader>: it is the stream's.
  using OnIdle = MultishotRecv::OnIdle;
  StreamReader(EventLoop& loop, int fd, uint32_t read_timeout_ms, OnIdle on_idle) noexcept;
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;
  /// Requires idle().
  ~StreamReader();

  class [[nodiscard]] ReadAwaiter {
   public:
    /// A read of the bytes as received, also on a TLS connection (its ciphertext).
    struct RawTag {};
    ReadAwaiter(StreamReader& reader, std::span<std::byte> destination) noexcept;
    ReadAwaiter(StreamReader& reader, BufferLease* lend_into) noexcept;
    ReadAwaiter(StreamReader& reader, BufferLease* lend_into, RawTag) noexcept;
    ReadAwaiter(const ReadAwaiter&) = delete;
    ReadAwaiter& operator=(const ReadAwaiter&) = delete;
    ~ReadAwaiter();
    /// Data already received (multishot) is returned without suspending.
    bool await_ready() const noexcept;
    bool await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<size_t> await_resume() noexcept;
    /// Ends this read early with operation_canceled (data that won the race is returned);
    /// the connection goes on, and bytes that arrive later are there for the next read.
    void cancel() noexcept;
    /// Ends a multishot read that waits with nothing received, at once and for good: it
    /// resumes (later, from the loop) with operation_canceled without touching the reader
    /// again, so the connection may be read by another, or destroyed, before it does (a pooled
    /// connection handed out without a wait for its watcher). False, and nothing done, when
    /// the read cannot end so (news arrived, or a single-shot or TLS read): cancel() then.
    bool abandon() noexcept;
    /// abandon() without the resumption: the waiting coroutine stays suspended, as far as this
    /// read is concerned for good, and its owner resumes or destroys it another way (a pooled
    /// connection's watcher, which waits on the next connection given to it instead). The
    /// awaiter may be destroyed at once.
    bool release() noexcept;
    EventLoop& loop() const noexcept { return reader_.loop(); }

   private:
    friend class StreamReader;
    friend class TlsConnection;
    struct SingleShot;
    // kTls: the TLS connection fills its plaintext (decrypting raw reads) and resumes us.
    // kAbandoned: abandon() ended it; the reader is not ours any more.
    enum class Mode : uint8_t { kImmediate, kSingleShot, kMultishot, kTls, kAbandoned };
    bool start_single_shot() noexcept;
    // (detail::IoContext: inside the reader, plain IoContext names its private base.)
    static std::coroutine_handle<> on_single_shot(detail::IoContext& context, int32_t res,
                                                  uint32_t flags) noexcept;

    StreamReader& reader_;
    std::span<std::byte> destination_;
    BufferLease* lease_ = nullptr;  // receive(): the data is lent here instead of copied
    std::coroutine_handle<> caller_;
    PoolPtr<SingleShot> single_shot_;  // only while a single-shot read is in flight
    int32_t result_ = 0;               // single-shot result, or an error found before any I/O
    Mode mode_ = Mode::kImmediate;
    bool raw_ = false;  // RawTag: no decryption on a TLS connection
  };

  /// receive(): a read whose bytes arrive in a lent buffer, so an idle connection's handler
  /// holds no buffer of its own.
  class [[nodiscard]] ReceiveAwaiter : public ReadAwaiter {
   public:
    explicit ReceiveAwaiter(StreamReader& reader) noexcept : ReadAwaiter(reader, &received_) {}
    Result<BufferLease> await_resume() noexcept {
      auto n = ReadAwaiter::await_resume();
      if (!n) return Unexpected{n.error()};
      return std::move(received_);
    }

   private:
    BufferLease received_;
  };

  ReadAwaiter read(std::span<std::byte> buffer) noexcept { return {*this, buffer}; }
  ReceiveAwaiter receive() noexcept { return ReceiveAwaiter(*this); }

  /// Ends the current and every later read with `reason`; queued bytes are dropped with the
  /// connection. Idempotent (the first reason stays).
  void stop(std::errc reason = std::errc::operation_canceled) noexcept;
  /// Takes effect from the next read. 0 = none.
  void set_read_timeout_ms(uint32_t ms) noexcept { timeout_ms_ = ms; }
  uint32_t read_timeout_ms() const noexcept { return timeout_ms_; }

  bool idle() const noexcept { return !single_shot_in_flight_ && !MultishotRecv::busy(); }
  bool stopped() const noexcept { return state_ != State::kOpen; }
  bool multishot() const noexcept { return multishot_; }
  /// A TLS connection's reader (reads return decrypted bytes).
  bool encrypted() const noexcept { return tls_; }
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  uint64_t pauses() const noexcept { return MultishotRecv::pauses(); }
  EventLoop& loop() const noexcept { return MultishotRecv::loop(); }

 private:
  friend class TlsConnection;
  enum class State : uint8_t { kOpen, kStopped };
  friend HookAccess;
  void on_deadline() noexcept;
  void notify_idle() noexcept;
  // Multishot mode: the read timeout of the waiting reader.
  TimerNode& deadline() noexcept { return *this; }
  // Always there, also on a loop without receive buffers (then unused, multishot_ false): the
  // loop, the fd and the owner's idle callback are the stream's, kept once per connection.
  MultishotRecv& stream() noexcept { return *this; }
  const MultishotRecv& stream() const noexcept { return *this; }

  uint32_t timeout_ms_;
  std::errc stop_reason_ = std::errc::operation_canceled;
  State state_ = State::kOpen;
  bool multishot_;  // reads come from the stream (the MultishotRecv base)
  bool single_shot_in_flight_ = false;
  bool tls_ = false;  // a TlsConnection's reader: reads return decrypted bytes
  ReadAwaiter* waiting_ = nullptr;
  uint64_t bytes_read_ = 0;
};

}  // namespace ucp::detail
