#pragma once
// TcpConnection: one TCP connection. It lives on one loop from accept (or connect) to close
// and is used by coroutines running on that loop only (no locks).
//
//   auto n = co_await conn.read(buf);          // read_timeout_ms applies; 0 = peer closed
//   if (!co_await conn.write_all({buf, *n}))   // every byte in the kernel, or an error
//   if (!co_await conn.write(reply))           // copied and queued: usually no suspension
//
//   auto data = co_await conn.receive();       // the same, without a buffer of your own:
//   co_await conn.write_all(data->bytes());    // the loop lends one (io/BufferLease.h)
//
// It is three parts: the socket and its close protocol here, the input side (StreamReader:
// read(), receive(), the read timeout, back-pressure on the receive) and the output side
// (StreamWriter: one ordered output queue, write(), write_all(), the write deadline).
//
// close() first flushes the queue (bounded: close_flush_timeout_ms without progress), then
// shuts the socket down, cancels what is in flight and waits for every completion before it
// closes the fd: close(2) alone would not cancel a pending receive, and a reused fd number
// could receive an old operation's result. The destructor requires that nothing is in flight.
//
// Plain or TLS: a server with ServerOptions::tls, or a client with ClientOptions::tls, makes
// connections whose socket carries TLS records; this same type then reads and writes
// plaintext (decrypted from the loop's receive buffers, sealed into records on the output
// path), close() sends close_notify, and a peer's EOF without one is an error of the tls
// category (tls::Errc::kTruncated), never a read of 0. tls() describes the session (version,
// ALPN, the peer's certificate). docs/tls.md, "Connections".

#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/OutputLimits.h"
#include "ucp/net/detail/StreamReader.h"
#include "ucp/net/detail/StreamWriter.h"

namespace ucp {

namespace tls {
class TlsSession;
}
namespace detail {
class TlsConnection;
}

class TcpConnection : private detail::StreamReader, private detail::StreamWriter {
 public:
  using ReadAwaiter = detail::StreamReader::ReadAwaiter;
  using ReceiveAwaiter = detail::StreamReader::ReceiveAwaiter;
  using WriteAwaiter = detail::StreamWriter::WriteAwaiter;
  using SentAwaiter = detail::StreamWriter::SentAwaiter;

  TcpConnection(EventLoop& loop, UniqueFd fd, InetAddress peer, uint32_t read_timeout_ms,
                OutputLimits output_limits = {}) noexcept;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  ~TcpConnection();

  /// Reads at most buffer.size() bytes. 0 means the peer closed its side (EOF) and nothing
  /// else; errors: timed_out (read_timeout_ms), operation_canceled (closing or draining),
  /// connection_reset, ...
  ReadAwaiter read(std::span<std::byte> buffer) noexcept { return reader().read(buffer); }
  ReadAwaiter read(std::span<char> buffer) noexcept {
    return reader().read(std::as_writable_bytes(buffer));
  }
  /// Like read(), but the bytes come in a buffer the loop lends (no copy when reads come from
  /// the multishot receive; a registered buffer for single-shot reads when one is free). An
  /// empty lease means EOF. Drop the lease once done with its bytes.
  ReceiveAwaiter receive() noexcept { return reader().receive(); }
  /// receive() into a lease the caller keeps (it must outlive the read): the result is the
  /// number of bytes lent (0: EOF). An awaiter without a lease of its own, for coroutine
  /// frames that every idle connection holds.
  ReadAwaiter receive_into(BufferLease& lease) noexcept { return {reader(), &lease}; }
  /// Sends every byte of `data` behind what is queued; resumes once all are in the kernel.
  WriteAwaiter write_all(std::span<const std::byte> data) noexcept {
    return writer().write_all(data);
  }
  WriteAwaiter write_all(std::span<const char> data) noexcept {
    return writer().write_all(std::as_bytes(data));
  }
  /// Queues a copy of `data` behind what is queued and completes at once while the queue
  /// holds at most max_output_bytes; past that, waits until it has drained to half. The
  /// result only reports errors already known (an earlier send failed: its error; closing:
  /// operation_canceled): later failures surface at the next write.
  WriteAwaiter write(std::span<const std::byte> data) noexcept { return writer().write(data); }
  WriteAwaiter write(std::span<const char> data) noexcept {
    return writer().write(std::as_bytes(data));
  }

  /// Resumes once everything written so far is in the kernel (or the output failed: its
  /// error), e.g. before bytes go to the socket another way (io::send_file).
  SentAwaiter all_sent() noexcept { return writer().all_sent(); }

  /// Half-close: sends FIN once the queued output is sent; reading stays possible. Later
  /// writes fail with broken_pipe.
  void shutdown_write() noexcept { writer().shutdown_write(); }
  /// Ends the current and all later reads with operation_canceled; writes go on. Used to
  /// drain a connection at graceful shutdown.
  void stop_reading() noexcept { reader().stop(); }
  /// Flushes queued output (bounded: close_flush_timeout_ms without progress), cancels what
  /// is in flight, awaits every completion, closes the fd. Later writes: operation_canceled.
  /// Idempotent.
  Task<> close();

  /// Read timeout for the next reads (0 = none).
  void set_read_timeout_ms(uint32_t ms) noexcept { reader().set_read_timeout_ms(ms); }
  /// Output that waits this long for the peer to take a byte fails with timed_out and stops
  /// reading (0 = never).
  void set_write_timeout_ms(uint32_t ms) noexcept { writer().set_write_timeout_ms(ms); }

  EventLoop& loop() const noexcept { return reader().loop(); }
  int fd() const noexcept { return fd_.get(); }
  const InetAddress& peer() const noexcept { return peer_; }
  uint32_t read_timeout_ms() const noexcept { return reader().read_timeout_ms(); }
  bool closed() const noexcept { return state_ != State::kOpen; }
  /// close() has finished: the fd is closed and nothing is in flight (it may be destroyed).
  bool close_finished() const noexcept { return state_ == State::kClosed; }
  /// Made as a detail::TlsConnection (whatever tls() says now): its owner destroys it as one.
  bool tls_object() const noexcept { return tls_object_; }
  /// True when reads come from a multishot receive into the loop's receive buffers.
  bool multishot() const noexcept { return reader().multishot(); }
  uint64_t bytes_read() const noexcept { return reader().bytes_read(); }
  /// Times the multishot receive paused because the handler was behind (back-pressure).
  uint64_t receive_pauses() const noexcept { return reader().pauses(); }
  /// Every byte sent to the peer: written through the queue, or sent around it by a caller
  /// that said so with count_sent_around(). On TLS, bytes_read() and bytes_written() count the
  /// socket's bytes (ciphertext).
  uint64_t bytes_written() const noexcept { return writer().bytes_written(); }
  /// The TLS session of a TLS connection (its handshake done), or null for plain TCP. Bytes
  /// sent around the output queue would bypass it: io::send_file only when this is null.
  const tls::TlsSession* tls() const noexcept;
  /// Counts bytes sent on fd() around the output queue (io::send_file, after all_sent()).
  void count_sent_around(uint64_t bytes) noexcept { writer().count_sent_around(bytes); }
  /// Bytes written but not yet taken by the kernel (copies plus suspended writers' spans).
  size_t queued_output_bytes() const noexcept { return writer().queued_bytes(); }
  /// Sends submitted so far (each carries everything queued when it started).
  uint64_t sends_submitted() const noexcept { return writer().sends_submitted(); }
  const OutputLimits& output_limits() const noexcept { return writer().limits(); }

 private:
  friend class detail::TlsConnection;
  enum class State : uint8_t { kOpen, kClosing, kClosed };
  bool idle() const noexcept { return reader().idle() && writer().idle(); }
  friend HookAccess;
  void on_side_idle() noexcept;
  void on_output_event(detail::StreamWriter::Event event) noexcept;
  detail::StreamReader& reader() noexcept { return *this; }
  const detail::StreamReader& reader() const noexcept { return *this; }
  detail::StreamWriter& writer() noexcept { return *this; }
  const detail::StreamWriter& writer() const noexcept { return *this; }

  struct DrainAwaiter {
    TcpConnection& connection;
    bool await_ready() const noexcept { return connection.idle(); }
    void await_suspend(std::coroutine_handle<> caller) noexcept {
      connection.drain_waiter_ = caller;
    }
    void await_resume() const noexcept {}
  };

  // Every idle server connection holds this object (568 bytes) inside TcpServer::serve's
  // coroutine frame, which must stay within the 768-byte pool class: a frame past it costs 256
  // bytes more per connection (ConnectionMemory_test catches it). The input and output sides
  // are private bases (their callbacks find the connection with ucp/base/Hook.h, no pointer
  // back), and the loop and the fd are kept once (the reader's and the writer's come from their
  // operations).
  UniqueFd fd_;
  InetAddress peer_;
  std::coroutine_handle<> drain_waiter_;  // close() waiting for the last completion
  State state_ = State::kOpen;
  bool tls_object_ = false;  // this is a detail::TlsConnection (destroyed as one)
};

/// A coroutine that serves a connection: `ucp::Task<> echo(ucp::TcpConnection& conn)`, or a
/// lambda of that shape. What TcpServer runs for each connection it accepts (on the
/// connection's worker loop) and ReconnectingClient for each it makes; the connection is
/// closed once it returns.
template <class F>
concept ConnectionHandler = std::invocable<F&, TcpConnection&> &&
                            std::same_as<std::invoke_result_t<F&, TcpConnection&>, Task<>>;

}  // namespace ucp
