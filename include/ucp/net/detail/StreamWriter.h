#pragma once
// StreamWriter: the output side of a TcpConnection. One queue (OutputQueue) and at most one
// send in flight (overlapping sends on one socket can reorder bytes), so bytes leave in call
// order whichever of write() and write_all() wrote them. Everything written during one loop
// iteration goes out in one send (a pre-submit hook gathers it), and writes made while a send
// is in flight go out together in the next one.
//
// - write_all(span) stays suspended until its bytes are in the kernel; they are sent from the
//   caller's memory, never copied.
// - write(span) copies into the queue's pool chunks and completes at once while the queue
//   holds at most max_output_bytes. The write that would pass it, and every write() after it,
//   suspends (its bytes are queued in place, in the caller's memory) until the queue has
//   drained to max_output_bytes / 2, so a peer that never reads costs about max_output_bytes.
// - A deadline bounds how long queued output may wait for the peer to take a byte:
//   write_timeout_ms while the connection is open (0 = none), close_flush_timeout_ms while it
//   closes. When it passes, the output fails with timed_out.
// A failed send (connection_reset, broken_pipe, timed_out...) drops the queue; every writer
// still waiting and every later write gets that error.
//
// On a TLS connection (TlsConnection, src/net) a send carries ciphertext: the queued plaintext
// is sealed into records (up to kSealBytes at a time) when a send starts, and its writers are
// done once all of that ciphertext is in the kernel. Output of the session's own (handshake,
// alerts, close_notify: sent before the FIN of shutdown_write() and close()) goes out the same
// way, so one send is in flight whatever it carries.
//
// Thread contract: the connection's loop thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/io/Timer.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/io/detail/VectoredSend.h"
#include "ucp/net/OutputLimits.h"
#include "ucp/net/detail/OutputQueue.h"

namespace ucp::detail {

class TlsConnection;

// The send hook, the deadline's timer node and the send are private bases rather than members
// pointing back here (their callbacks find the writer with ucp/base/Hook.h): every connection
// carries a writer, and the timer node's tail padding holds the small fields below. The owner
// holds the writer as a base too, and makes `on_event` with hook<&Owner::f>.
class StreamWriter : private detail::PreSubmitHook, private TimerNode, private VectoredSend {
 public:
  /// What the writer tells its owner (one callback: every connection keeps its pointer).
  enum class Event : uint8_t {
    kIdle,      // the send in flight has completed
    kTimedOut,  // the peer took no byte for the whole timeout: the output failed (once)
  };
  using OnEvent = void (*)(StreamWriter& writer, Event event) noexcept;
  /// TLS: plaintext sealed per send at most (four full records), so a large write_all()
  /// does not turn into its whole size in ciphertext at once.
  static constexpr size_t kSealBytes = 64 * 1024;
  StreamWriter(EventLoop& loop, int fd, OutputLimits limits, OnEvent on_event) noexcept;
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;
  /// Requires idle() and nothing borrowed in the queue (abandon()).
  ~StreamWriter();

  /// One write() or write_all(). `data` stays the caller's until the awaiter resumes: a
  /// suspended writer's bytes are queued as a span into its memory.
  class [[nodiscard]] WriteAwaiter : private OutputSegment {
   public:
    enum class Mode : uint8_t { kAll, kBuffered };
    WriteAwaiter(StreamWriter& writer, std::span<const std::byte> bytes, Mode mode) noexcept;
    WriteAwaiter(const WriteAwaiter&) = delete;
    WriteAwaiter& operator=(const WriteAwaiter&) = delete;
    /// write() copies here when the queue has room, and errors complete here.
    bool await_ready() noexcept;
    void await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<void> await_resume() const noexcept;
    /// Ends this write early with operation_canceled. A write none of whose bytes has been sent
    /// just leaves the queue (if the send in flight covers it, once that send completes); one
    /// already partly sent cannot be taken back without cutting the byte stream, so the
    /// connection's output fails instead.
    void cancel() noexcept { writer_.cancel_writer(*this); }
    EventLoop& loop() const noexcept { return writer_.loop(); }

   private:
    friend class StreamWriter;
    // Awaiters live in coroutine frames (a WebSocket's send holds one), so this one is kept
    // small: the bytes are the queue's segment from the start (its base, which leads back
    // here by a cast and whose tail padding holds the flags), and the caller waiting and the
    // outcome share their room, since the outcome is known only once the caller is resumed.
    static WriteAwaiter& of(OutputSegment& segment) noexcept {
      return static_cast<WriteAwaiter&>(segment);
    }
    void finish(std::error_code error) noexcept;
    Mode mode_;
    bool queued_ = false;            // suspended with its segment in the queue
    bool cancel_requested_ = false;  // cancel() while the send in flight covered it
    StreamWriter& writer_;
    union {
      std::coroutine_handle<> caller_;  // while queued_
      std::error_code error_;           // before suspending, and once resumed
    };
  };

  WriteAwaiter write_all(std::span<const std::byte> bytes) noexcept {
    return {*this, bytes, WriteAwaiter::Mode::kAll};
  }
  WriteAwaiter write(std::span<const std::byte> bytes) noexcept {
    return {*this, bytes, WriteAwaiter::Mode::kBuffered};
  }

  /// Half-close: FIN once the queued output is sent. Later writes fail with broken_pipe.
  void shutdown_write() noexcept;
  /// Closing: later writes fail with operation_canceled; the queue drains under
  /// close_flush_timeout_ms. Resumes once the queue is empty or the output failed.
  class [[nodiscard]] FlushAwaiter {
   public:
    explicit FlushAwaiter(StreamWriter& writer) noexcept : writer_(writer) {}
    bool await_ready() const noexcept;
    void await_suspend(std::coroutine_handle<> caller) noexcept;
    void await_resume() const noexcept {}

   private:
    StreamWriter& writer_;
  };
  FlushAwaiter close_and_flush() noexcept;
  /// Resumes once every byte written so far is in the kernel (nothing queued, no send in
  /// flight), or the output failed: then with its error. The connection stays open; what
  /// comes next may bypass the queue (a file sent straight from the page cache).
  class [[nodiscard]] SentAwaiter {
   public:
    explicit SentAwaiter(StreamWriter& writer) noexcept : flush_(writer), writer_(writer) {}
    bool await_ready() const noexcept { return flush_.await_ready(); }
    void await_suspend(std::coroutine_handle<> caller) noexcept { flush_.await_suspend(caller); }
    Result<void> await_resume() const noexcept {
      if (writer_.error_) return Unexpected{writer_.error_};
      return {};
    }

   private:
    FlushAwaiter flush_;
    StreamWriter& writer_;
  };
  SentAwaiter all_sent() noexcept { return SentAwaiter(*this); }
  /// Cancels the send in flight (its completion fails the output).
  void cancel_send() noexcept { send().cancel(); }
  /// With nothing in flight: drops what is left, handing borrowed memory back to its writers.
  void abandon() noexcept;
  void set_write_timeout_ms(uint32_t ms) noexcept { limits_.write_timeout_ms = ms; }

  bool idle() const noexcept { return !VectoredSend::in_flight(); }
  bool failed() const noexcept { return static_cast<bool>(error_); }
  size_t queued_bytes() const noexcept { return queue_.size(); }
  uint64_t bytes_written() const noexcept { return bytes_written_; }
  /// Bytes sent to the socket around the queue (io::send_file), counted in bytes_written().
  void count_sent_around(uint64_t bytes) noexcept { bytes_written_ += bytes; }
  uint64_t sends_submitted() const noexcept { return sends_submitted_; }
  const OutputLimits& limits() const noexcept { return limits_; }

 private:
  friend class TlsConnection;
  enum class State : uint8_t {
    kOpen,
    kShut,     // shutdown_write(): FIN once the queue is empty
    kClosing,  // close(): draining, no new writes
  };
  void request_send() noexcept;
  void start_send() noexcept;
  /// Nothing left to send: the queue is empty and, on TLS, so is the session's output.
  bool drained() const noexcept { return queue_.empty() && !(tls_ && tls_pending()); }
  // TLS (StreamWriter.cpp, "TLS"): ciphertext or sealed plaintext not yet sent.
  bool tls_pending() const noexcept;
  void start_tls_send() noexcept;
  size_t tls_sent(size_t bytes) noexcept;  // returns the plaintext bytes now done
  bool queue_close_notify() noexcept;
  void release_waiting_writers() noexcept;
  void fail(std::error_code error) noexcept;
  void drop_queue() noexcept;
  void finish_writer(OutputSegment& segment, std::error_code error) noexcept;
  void cancel_writer(WriteAwaiter& writer) noexcept;
  void settle_cancels() noexcept;
  void arm_deadline() noexcept;
  void wake_flush_waiter() noexcept;
  friend HookAccess;
  void on_send_complete(int32_t res) noexcept;
  void on_deadline() noexcept;

  // The loop and the fd are the send's: one copy per connection.
  EventLoop& loop() const noexcept { return VectoredSend::loop(); }
  // The one send in flight.
  detail::VectoredSend& send() noexcept { return *this; }
  // Queued while output waits for a send to start.
  detail::PreSubmitHook& send_hook() noexcept { return *this; }
  // No byte taken for too long: the output fails.
  TimerNode& deadline() noexcept { return *this; }

  State state_ = State::kOpen;
  bool full_ = false;             // past max_output_bytes: write() waits until half is left
  bool cancels_pending_ = false;  // some writer's cancel waits for the send in flight
  bool tls_ = false;              // a TlsConnection's writer: sends carry ciphertext
  bool quiet_timer_ = false;      // TLS, drained: the deadline's node times the quiet instead
  uint8_t tls_warmth_ = 0;        // TLS: receives that came within the quiet time (up to 2)
  OutputLimits limits_;
  OutputQueue queue_;
  // The last segment the send in flight covers (segments up to it may be read by the kernel).
  const OutputSegment* in_flight_last_ = nullptr;
  std::coroutine_handle<> flush_waiter_;  // close() waiting for the queue to drain
  std::error_code error_;                 // the first failure; every later write gets it
  OnEvent on_event_;
  uint64_t bytes_written_ = 0;
  uint64_t sends_submitted_ = 0;
};

}  // namespace ucp::detail
