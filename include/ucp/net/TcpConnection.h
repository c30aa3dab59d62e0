#pragma once
// TcpConnection: one accepted TCP connection. It lives on one worker loop from accept to
// close and is used by coroutines running on that loop only (no locks).
//
//   auto n = co_await conn.read(buf);          // read_timeout_ms applies; 0 = peer closed
//   if (!co_await conn.write_all({buf, *n}))   // every byte, or an error
//
//   auto data = co_await conn.receive();       // the same, without a buffer of your own:
//   co_await conn.write_all(data->bytes());    // the loop lends one (io/BufferLease.h)
//
// Reads carry an IORING_OP_LINK_TIMEOUT (read_timeout_ms). Writes: at most one send is in
// flight per connection (overlapping sends on one socket can reorder bytes, PITFALLS #14);
// later writers wait their turn in FIFO order. A writer stays suspended until its bytes are
// in the kernel, so a peer that never reads stalls its writer instead of growing memory.
// `close()` cancels what is in flight, waits for every CQE, then closes the fd; the
// destructor requires that nothing is in flight.

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

namespace ucp {

class TcpConnection {
 public:
  TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer, uint32_t read_timeout_ms) noexcept;
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

  class WriteAwaiter : public io::SendAllOp {
   public:
    WriteAwaiter(TcpConnection& connection, std::span<const std::byte> data) noexcept;
    bool await_suspend(std::coroutine_handle<> caller) noexcept;
    Result<void> await_resume() noexcept;

   private:
    friend class TcpConnection;
    TcpConnection& connection_;
    std::coroutine_handle<> caller_;
    WriteAwaiter* next_waiting_ = nullptr;
    int32_t refused_ = 0;  // set when the connection closed while this writer waited
    bool started_ = false;
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
  /// Sends every byte of `data` (waiting its turn behind earlier writers).
  WriteAwaiter write_all(std::span<const std::byte> data) noexcept { return {*this, data}; }
  WriteAwaiter write_all(std::span<const char> data) noexcept {
    return {*this, std::as_bytes(data)};
  }

  /// Half-close: sends FIN after queued output; reading stays possible.
  void shutdown_write() noexcept;
  /// Ends the current and all later reads with operation_canceled; writes go on. Used to
  /// drain a connection at graceful shutdown.
  void stop_reading() noexcept;
  /// Cancels what is in flight, awaits every CQE, closes the fd. Idempotent.
  Task<> close();

  EventLoop& loop() noexcept { return loop_; }
  int fd() const noexcept { return fd_.get(); }
  const InetAddress& peer() const noexcept { return peer_; }
  uint32_t read_timeout_ms() const noexcept { return read_timeout_ms_; }
  bool closed() const noexcept { return closed_; }
  /// True when reads come from a multishot receive into the loop's provided buffers.
  bool multishot() const noexcept { return multishot_.has_value(); }
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  uint64_t bytes_written() const noexcept { return bytes_written_; }

 private:
  void operation_started() noexcept { ++in_flight_; }
  void operation_finished() noexcept;
  void start_next_writer() noexcept;
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
  WriteAwaiter* writer_ = nullptr;        // the one send in flight
  WriteAwaiter* waiting_head_ = nullptr;  // FIFO of writers behind it
  WriteAwaiter* waiting_tail_ = nullptr;
  uint64_t bytes_read_ = 0;
  uint64_t bytes_written_ = 0;
  bool reading_stopped_ = false;
  bool closed_ = false;
};

}  // namespace ucp
