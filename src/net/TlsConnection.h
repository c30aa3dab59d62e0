#pragma once
// TlsConnection: a TcpConnection whose socket carries TLS records. The transform lives inside
// the connection (the TcpConnection a handler gets is this object), so HTTP, WebSocket and
// user code read and write plaintext through the same calls and types as on plain TCP, and
// the plain path pays one flag test per read and per send for the possibility:
//
//   socket ──> loop's receive buffers (multishot) or a lent buffer ──> decrypt ──> plaintext
//              (ciphertext, read raw by the connection)                  (a pool block, lent
//                                                                         or copied out)
//   write()/write_all() ──> output queue ──> sealed at send time (≤ 64 KiB) ──> one send
//
// - Reading: a read first takes plaintext already decrypted, then decrypts the ciphertext the
//   multishot receive has queued; only when that gives nothing does it wait, through a small
//   coroutine (the "fill") that reads raw ciphertext until a record completes. 0 means the
//   peer's close_notify; an EOF without it is tls::Errc::kTruncated.
// - Writing (StreamWriter.cpp, "TLS"): the queue holds plaintext; a send seals what is queued
//   and sends the records; writers are done once their records are in the kernel.
// - The handshake runs before the handler (server) or before connect() returns (client), on
//   the same reads and sends, bounded by a timeout; a server takes at most
//   kHandshakeStepsPerIteration handshake steps per loop iteration on its thread, in the order
//   the handshakes asked for them, so established connections of the worker wait for at most
//   that much handshake work and no handshake is overtaken by newer ones.
// - Closing: close() flushes, sends close_notify, then closes as TcpConnection does.
//
// The reader and the writer find this object with a cast down from themselves (they are
// private bases of the connection) when their TLS flag is set; TcpServer and TcpClient make
// it, and destroy it as this type.
//
// Thread contract: the connection's loop thread only.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/tls/TlsSession.h"

namespace ucp::detail {

class TlsConnection final : public TcpConnection {
 public:
  /// Handshake steps a thread runs per loop iteration at most (server side). A full handshake
  /// costs the CPU of 100-200 small records (docs/tls.md, "Costs"): one step per iteration
  /// lets the established connections' completions of that iteration run first, and a storm
  /// of new connections cannot hold the loop for more than one step at a time.
  static constexpr uint32_t kHandshakeStepsPerIteration = 1;
  /// Decrypted bytes are taken into blocks of the loop's pool of this size.
  static constexpr size_t kPlaintextBytes = MemoryPool::kMaxBlockSize;
  /// OpenSSL's record buffers (about 34 KiB) are freed once the connection has neither sent
  /// nor waited for a receive for this long ("Record buffers" in TlsConnection.cpp).
  static constexpr std::chrono::milliseconds kBuffersQuiet{20};

  TlsConnection(EventLoop& loop, UniqueFd fd, InetAddress peer, uint32_t read_timeout_ms,
                OutputLimits output_limits, tls::TlsSession session) noexcept;
  ~TlsConnection();

  // The reader and the writer are private bases of the TcpConnection this is (a friend of
  // both): the cast down is container_of, as in ucp/base/Hook.h.
  static TlsConnection& of(StreamReader& reader) noexcept {
    return static_cast<TlsConnection&>(static_cast<TcpConnection&>(reader));
  }
  static TlsConnection& of(StreamWriter& writer) noexcept {
    return static_cast<TlsConnection&>(static_cast<TcpConnection&>(writer));
  }
  static const TlsConnection& of(const StreamWriter& writer) noexcept {
    return static_cast<const TlsConnection&>(static_cast<const TcpConnection&>(writer));
  }

  /// Runs the handshake to its end (the session says who speaks first) within `timeout_ms`
  /// (0: no limit): ok, or why not (the session's error, kHandshakeTimeout, or the transport's
  /// error). Bytes the peer sent behind its last handshake message are kept for the first read.
  Task<Result<void>> handshake(uint32_t timeout_ms);

  tls::TlsSession& session() noexcept { return session_; }
  const tls::TlsSession& session() const noexcept { return session_; }

  /// Frees the session's record buffers (a partial record keeps them).
  void release_buffers() noexcept { session_.release_buffers(); }

  /// After a failed handshake: the connection goes on as plain TCP (for one answer in
  /// plaintext, such as a 400 to an HTTP client on the TLS port). False when output of the
  /// session is in flight (the answer would follow ciphertext): then only close.
  bool drop_tls() noexcept;

 private:
  friend class StreamReader;
  friend class StreamWriter;
  using ReadAwaiter = StreamReader::ReadAwaiter;

  // ---- the reader's side ----
  /// await_ready of a read: plaintext (or the end: close_notify, an error) is there, after
  /// decrypting what has been received already.
  bool plaintext_ready() noexcept;
  /// await_suspend: starts the fill, which resumes `awaiter` once plaintext_ready() holds or a
  /// raw read failed.
  void start_fill(ReadAwaiter& awaiter);
  Spawned fill(ReadAwaiter& awaiter);
  struct FillStep;
  void cancel_fill() noexcept;
  /// await_resume: the plaintext (copied, or the block lent), 0 after close_notify, or why not.
  Result<size_t> finish_read(ReadAwaiter& awaiter) noexcept;
  /// Decrypts `ciphertext` into plaintext_ (the rest is kept by the session when it fills up).
  void decrypt(std::span<const std::byte> ciphertext) noexcept;
  bool settled() const noexcept {
    return !plaintext_.empty() || session_.failed() || session_.peer_closed() || failure_;
  }

  tls::TlsSession session_;
  BufferLease plaintext_;           // decrypted and not yet read: none while idle
  ReadAwaiter* filling_ = nullptr;  // the fill's raw read while it waits
  std::error_code fill_error_;      // the fill's raw read failed: for the read it serves
  std::error_code failure_;         // no memory for plaintext: every read fails
  size_t sealed_ = 0;               // the writer's: plaintext sealed, its records not all sent
};

}  // namespace ucp::detail
