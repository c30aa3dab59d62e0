#pragma once
// TcpConnection: one accepted TCP connection. It lives on one worker loop from accept to
// close and is used by coroutines running on that loop only (no locks).
//
//   auto n = co_await conn.read(buf);          // read_timeout_ms applies; 0 = peer closed
//   if (!co_await conn.write_all({buf, *n}))   // every byte in the kernel, or an error
//   if (!co_await conn.write(reply))           // copied and queued: usually no suspension
//
//   auto data = co_await conn.receive();       // the same, without a buffer of your own:
//   co_await conn.write_all(data->bytes());    // the loop lends one (io/BufferLease.h)
//
// Reads carry an IORING_OP_LINK_TIMEOUT (read_timeout_ms). Writes share one output queue
// (OutputQueue), so bytes leave in call order whichever of write() and write_all() wrote
// them, and at most one send is in flight per connection (overlapping sends on one socket
// can reorder bytes, PITFALLS #14). Everything written during one loop iteration goes out
// in one send (a pre-submit hook gathers it), and writes made while a send is in flight go
// out together in the next one.
// - write_all(span) stays suspended until its bytes are in the kernel; they are sent from
//   the caller's memory, never copied.
// - write(span) copies into the queue's pool chunks and completes at once while the queue
//   holds at most max_output_bytes. The write that would pass it, and every write() after
//   it, suspends (its bytes are queued in place, in the caller's memory) until the queue
//   has drained to max_output_bytes / 2, so a peer that never reads costs about
//   max_output_bytes of copies per connection.
// A failed send (connection_reset, broken_pipe...) drops the queue; every later write
// returns that error. `close()` first flushes the queue, giving up after
// close_flush_timeout_ms without progress, then cancels what is in flight, waits for every
// CQE and closes the fd; the destructor requires that nothing is in flight.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Operations.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/OutputQueue.h"

namespace ucp {

/// What bounds a connection's queued output (TcpServer fills it from ServerOptions).
struct OutputLimits {
  /// write() completes without waiting while the queue holds at most this many bytes.
  uint64_t max_output_bytes = 4 * 1024 * 1024;
  /// close() waits for queued output this long without a byte taken, then drops it.
  uint32_t close_flush_timeout_ms = 5000;
};

class TcpConnection {
 public:
  TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer, uint32_t read_timeout_ms,
                OutputLimits output_limits = {}) noexcept;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  ~TcpConnection();

  class ReadAwaiter : public io::RecvOp {
   public:
    ReadAwaiter(TcpConnection& connection, std::span<std::byte> buffer) noexcept;
    ReadAwaiter(TcpConnection& connection, io::BufferLease* lend_into) noexcept;
    /// Data already received by the multishot receive is returned without suspending.
    bool await_ready() const noexcept;
    bool await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<size_t> await_resume() noexcept;

   private:
    friend class TcpConnection;
    enum class Mode : uint8_t { kImmediate, kSingleShot, kMultishot };
    bool start_single_shot(std::coroutine_handle<> caller) noexcept;

    bool wants_data() const noexcept { return lease_ != nullptr || !destination_.empty(); }

    TcpConnection& connection_;
    std::span<std::byte> destination_;
    io::BufferLease* lease_ = nullptr;  // receive(): the data is lent here instead of copied
    std::coroutine_handle<> caller_;
    Mode mode_ = Mode::kImmediate;
  };

  /// receive(): a read whose bytes arrive in a lent buffer (provided ring, registered or
  /// pool), so an idle connection's handler holds no buffer of its own.
  class ReceiveAwaiter : public ReadAwaiter {
   public:
    explicit ReceiveAwaiter(TcpConnection& connection) noexcept
        : ReadAwaiter(connection, &received_) {}
    Result<io::BufferLease> await_resume() noexcept {
      auto n = ReadAwaiter::await_resume();
      if (!n) return Unexpected{n.error()};
      return std::move(received_);
    }

   private:
    io::BufferLease received_;
  };

  /// One write() or write_all(). `data` stays the caller's until the awaiter resumes: a
  /// suspended writer's bytes are queued as a span into its memory.
  class WriteAwaiter {
   public:
    enum class Mode : uint8_t { kAll, kBuffered };
    WriteAwaiter(TcpConnection& connection, std::span<const std::byte> data, Mode mode) noexcept;
    WriteAwaiter(const WriteAwaiter&) = delete;
    WriteAwaiter& operator=(const WriteAwaiter&) = delete;
    /// write() copies here when the queue has room, and errors complete here.
    bool await_ready() noexcept;
    void await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<void> await_resume() const noexcept;

   private:
    friend class TcpConnection;
    struct Segment : OutputSegment {
      WriteAwaiter* writer = nullptr;
    };
    TcpConnection& connection_;
    std::span<const std::byte> data_;
    Segment segment_;
    std::coroutine_handle<> caller_;
    std::error_code error_;
    Mode mode_;
  };

  /// Reads at most buffer.size() bytes. 0 means the peer closed its side (EOF) and nothing
  /// else; errors: timed_out (read_timeout_ms), operation_canceled (closing or draining),
  /// connection_reset, ...
  ReadAwaiter read(std::span<std::byte> buffer) noexcept { return {*this, buffer}; }
  ReadAwaiter read(std::span<char> buffer) noexcept {
    return {*this, std::as_writable_bytes(buffer)};
  }
  /// Like read(), but the bytes come in a buffer the loop lends (no copy when reads come
  /// from the multishot receive; a registered buffer for single-shot reads when one is
  /// free). An empty lease means EOF. Drop the lease once done with its bytes.
  ReceiveAwaiter receive() noexcept { return ReceiveAwaiter(*this); }
  /// Sends every byte of `data` behind what is queued; resumes once all are in the kernel.
  WriteAwaiter write_all(std::span<const std::byte> data) noexcept {
    return {*this, data, WriteAwaiter::Mode::kAll};
  }
  WriteAwaiter write_all(std::span<const char> data) noexcept {
    return {*this, std::as_bytes(data), WriteAwaiter::Mode::kAll};
  }
  /// Queues a copy of `data` behind what is queued and completes at once while the queue
  /// holds at most max_output_bytes; past that, waits until it has drained to half. The
  /// result only reports errors already known (an earlier send failed: its error;
  /// closing: operation_canceled): later failures surface at the next write.
  WriteAwaiter write(std::span<const std::byte> data) noexcept {
    return {*this, data, WriteAwaiter::Mode::kBuffered};
  }
  WriteAwaiter write(std::span<const char> data) noexcept {
    return {*this, std::as_bytes(data), WriteAwaiter::Mode::kBuffered};
  }

  /// Half-close: sends FIN once the queued output is sent; reading stays possible. Later
  /// writes fail with broken_pipe.
  void shutdown_write() noexcept;
  /// Ends the current and all later reads with operation_canceled; writes go on. Used to
  /// drain a connection at graceful shutdown.
  void stop_reading() noexcept;
  /// Flushes queued output (bounded: close_flush_timeout_ms without progress), cancels what
  /// is in flight, awaits every CQE, closes the fd. Later writes: operation_canceled.
  /// Idempotent.
  Task<> close();

  EventLoop& loop() noexcept { return loop_; }
  int fd() const noexcept { return fd_.get(); }
  const InetAddress& peer() const noexcept { return peer_; }
  uint32_t read_timeout_ms() const noexcept { return read_timeout_ms_; }
  bool closed() const noexcept { return closed_; }
  /// True when reads come from a multishot receive into the loop's provided buffers.
  bool multishot() const noexcept { return multishot_.has_value(); }
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  /// Times the multishot receive paused because the handler was behind (back-pressure).
  uint64_t receive_pauses() const noexcept { return multishot_ ? multishot_->pauses() : 0; }
  uint64_t bytes_written() const noexcept { return bytes_written_; }
  /// Bytes written but not yet taken by the kernel (copies plus suspended writers' spans).
  size_t queued_output_bytes() const noexcept { return output_.size(); }
  /// Sends submitted so far (each carries everything queued when it started).
  uint64_t sends_submitted() const noexcept { return sends_submitted_; }
  const OutputLimits& output_limits() const noexcept { return output_limits_; }

 private:
  void operation_started() noexcept { ++in_flight_; }
  void operation_finished() noexcept;
  void request_send() noexcept;
  void start_send() noexcept;
  void release_waiting_writers() noexcept;
  void fail_output() noexcept;
  void finish_writer(OutputSegment& segment, std::error_code error) noexcept;
  void wake_flush_waiter() noexcept;
  static void on_send_complete(void* self, int32_t res) noexcept;
  static void on_send_hook(io::PreSubmitHook& hook) noexcept;
  static void on_flush_deadline(io::DeadlineNode& node) noexcept;
  static void on_multishot_final(void* self) noexcept;
  static std::coroutine_handle<> on_multishot_starved(void* self) noexcept;
  static void on_read_deadline(io::DeadlineNode& node) noexcept;

  struct DrainAwaiter {
    TcpConnection& connection;
    bool await_ready() const noexcept { return connection.in_flight_ == 0; }
    void await_suspend(std::coroutine_handle<> caller) noexcept {
      connection.drain_waiter_ = caller;
    }
    void await_resume() const noexcept {}
  };
  struct FlushAwaiter {
    TcpConnection& connection;
    bool await_ready() const noexcept;
    void await_suspend(std::coroutine_handle<> caller) noexcept;
    void await_resume() const noexcept;
  };

  EventLoop& loop_;
  UniqueFd fd_;
  InetAddress peer_;
  uint32_t read_timeout_ms_;
  uint32_t in_flight_ = 0;
  std::coroutine_handle<> drain_waiter_;
  ReadAwaiter* current_read_ = nullptr;  // a reader suspended in any mode
  std::optional<io::MultishotRecv> multishot_;
  struct ReadDeadline : io::DeadlineNode {
    TcpConnection* connection = nullptr;
  };
  ReadDeadline read_deadline_;
  bool read_timed_out_ = false;
  uint64_t bytes_read_ = 0;
  uint64_t bytes_written_ = 0;
  bool reading_stopped_ = false;
  bool closed_ = false;
  // ---- output ----
  OutputLimits output_limits_;
  OutputQueue output_;
  io::VectoredSend send_;  // the one send in flight
  struct SendHook : io::PreSubmitHook {
    TcpConnection* connection = nullptr;
  };
  SendHook send_hook_;  // queued while output waits for a send to start
  struct FlushDeadline : io::DeadlineNode {
    TcpConnection* connection = nullptr;
  };
  FlushDeadline flush_deadline_;
  std::coroutine_handle<> flush_waiter_;  // close() waiting for the queue to drain
  std::error_code write_error_;           // the first failure; every later write gets it
  uint64_t sends_submitted_ = 0;
  bool output_full_ = false;  // past max_output_bytes: write() waits until half is left
  bool write_shut_ = false;   // shutdown_write() called; FIN goes when the queue is empty
};

}  // namespace ucp
