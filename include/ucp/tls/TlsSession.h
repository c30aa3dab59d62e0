#pragma once
// TlsSession: one connection's TLS, without I/O ("sans-I/O"). The connection hands it the
// ciphertext it received and the plaintext to send; the session hands back plaintext and the
// ciphertext to send. It never touches a socket, a loop or a clock.
//
//   receive side                                 send side
//   ciphertext span ──> handshake() / read() ──> plaintext     plaintext ──> write()
//                                                              output: gather_output() ──> send
//                                                                      consume_output(sent)
//
// - Input: OpenSSL reads straight from the span passed to handshake() or read() (a custom
//   BIO, no copy into a memory BIO). Each call says how many bytes it consumed; the rest is
//   the caller's to pass again (keeping the buffer it came from) or to hand to keep(), which
//   copies it into the session. OpenSSL keeps a partial record itself, so a call stops short
//   of the span's end only when `plaintext` is full.
// - Output: handshake messages, records, alerts and close_notify accumulate in the session's
//   output after any call; send what gather_output() names after every call.
// - write() takes everything a connection queued in one loop iteration and seals it with one
//   SSL_write per 16 KiB (one record, not one per response).
// - Ending: close() queues close_notify. The transport's EOF is peer_eof(): from then on a
//   read that runs out of input fails with Errc::kTruncated, unless close_notify came first
//   (ReadStep::peer_closed). Bytes after the peer's close_notify are discarded.
// - Errors are values in the "tls" category (TlsError.h). The first fatal one sticks: every
//   later call returns it. OpenSSL may have queued an alert for the peer: send the output,
//   then close the transport.
//
// Memory: OpenSSL's record buffers (about 34 KiB) stay while the session is used, and go at
// release_buffers(), which the holder calls once the connection is quiet (TlsConnection: a
// while after its last send or receive); the handshake's end releases them too. The output and
// kept input are freed once drained. An idle session so holds neither (docs/tls.md gives the
// bytes per idle session).
//
// Ownership and threads: move-only; one thread at a time (the connection's loop). Sessions of
// one context may live on any threads.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <sys/uio.h>

#include "ucp/base/Result.h"
#include "ucp/tls/TlsError.h"
#include "ucp/tls/TlsOptions.h"
#include "ucp/tls/detail/CipherQueue.h"

struct ssl_st;  // OpenSSL's SSL

namespace ucp::tls {

class TlsContext;
class TlsSessionCache;

/// The peer's certificate as a handler sees it (mTLS identity, or the server a client reached).
struct PeerCertificate {
  std::string subject;                         // RFC 2253: "CN=client,O=Example"
  std::string issuer;                          // RFC 2253
  std::vector<std::string> subject_alt_names;  // "DNS:a.example", "IP:127.0.0.1", "email:..."
  int64_t not_before = 0;                      // seconds since the Unix epoch
  int64_t not_after = 0;                       // seconds since the Unix epoch
};

class TlsSession {
 public:
  /// A server session (waits for a ClientHello).
  static Result<TlsSession> accept(const TlsContext& server);
  /// A client session to `server_name` (a DNS name: SNI and the name verified; an IP literal:
  /// verified against the certificate's IP addresses, no SNI). With a cache, a session stored
  /// for that name is offered for resumption and new ones are stored in it.
  static Result<TlsSession> connect(const TlsContext& client, std::string_view server_name,
                                    TlsSessionCache* cache = nullptr);

  TlsSession() noexcept = default;  // empty: no SSL; every call but the destructor is invalid
  TlsSession(TlsSession&& other) noexcept;
  TlsSession& operator=(TlsSession&& other) noexcept;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  struct HandshakeStep {
    size_t consumed = 0;       // ciphertext bytes taken from the span given
    bool established = false;  // done: read() and write() may follow
  };
  /// Advances the handshake with `ciphertext` (empty for a client's first call, which queues
  /// the ClientHello). Not established and all consumed: it needs more input.
  Result<HandshakeStep> handshake(std::span<const std::byte> ciphertext = {});

  struct ReadStep {
    size_t consumed = 0;       // ciphertext bytes taken from the span given
    size_t plaintext = 0;      // bytes written at the front of the plaintext buffer
    bool peer_closed = false;  // the peer sent close_notify: no plaintext will follow
  };
  /// Decrypts into `plaintext` until it is full or the input runs out. Plaintext buffered
  /// from earlier calls comes first; an empty `ciphertext` only returns that. plaintext == 0
  /// and !peer_closed: more ciphertext is needed. Data that preceded an error is returned
  /// first, the error at the next call.
  Result<ReadStep> read(std::span<const std::byte> ciphertext, std::span<std::byte> plaintext);
  /// Copies ciphertext the caller will not pass again into the session; the next calls read
  /// it before their own span.
  void keep(std::span<const std::byte> ciphertext);
  /// The transport reached EOF: reads that run out of input end (kTruncated without the
  /// peer's close_notify).
  void peer_eof() noexcept { peer_eof_ = true; }
  /// True when read() may return plaintext without new input (decrypted bytes not yet
  /// taken, or a whole record kept).
  bool has_buffered_input() const noexcept;
  /// Frees OpenSSL's record buffers (the next read or write allocates them again). False, and
  /// nothing freed, while a partial record waits in them for the rest.
  bool release_buffers() noexcept;

  /// Seals `plaintext` into records in the output. Returns the bytes taken: all of them, or
  /// an error (kNotEstablished, kClosed, or the session's failure).
  Result<size_t> write(std::span<const std::byte> plaintext);
  /// The same for several buffers (a connection's queued writes): small ones share records.
  Result<size_t> write(std::span<const iovec> plaintext);
  /// Queues close_notify (once; nothing before the handshake is done or after a failure).
  /// Later writes fail with kClosed; reads go on (to see the peer's close_notify).
  void close() noexcept;

  bool has_output() const noexcept { return !output_.empty(); }
  size_t output_size() const noexcept { return output_.size(); }
  /// Names the ciphertext to send, front first; returns how many buffers it filled.
  size_t gather_output(std::span<iovec> buffers) const noexcept { return output_.gather(buffers); }
  /// `bytes` of the output were sent: drop them.
  void consume_output(size_t bytes) noexcept { output_.consume(bytes); }

  bool is_server() const noexcept { return server_; }
  bool established() const noexcept { return state_ == State::kEstablished; }
  bool failed() const noexcept { return state_ == State::kFailed; }
  /// The error that ended the session (none while it has not failed).
  std::error_code failure() const noexcept { return failure_; }
  /// close() was called (close_notify queued, or nothing to send).
  bool closed() const noexcept { return closed_; }
  /// The peer's close_notify arrived.
  bool peer_closed() const noexcept { return peer_closed_; }

  /// Once established: "TLSv1.2" or "TLSv1.3".
  std::string_view version() const noexcept;
  TlsVersion protocol() const noexcept;
  /// The cipher suite, e.g. "TLS_AES_128_GCM_SHA256".
  std::string_view cipher() const noexcept;
  /// The protocol ALPN chose ("" if none), and its index in the context's list (-1 if none).
  std::string_view alpn() const noexcept;
  int alpn_index() const noexcept;
  /// The SNI name: the one the client sent (server) or asked for (client); "" if none.
  std::string_view server_name() const noexcept;
  /// The handshake resumed an earlier session (a ticket).
  bool resumed() const noexcept;
  /// The peer's certificate (a client certificate, on a server), if it sent one.
  std::optional<PeerCertificate> peer_certificate() const;
  /// The SSL, for settings and queries UCP does not wrap. Do not change its BIOs.
  ssl_st* native_handle() const noexcept { return ssl_; }

 private:
  struct ClientState {
    TlsSessionCache* cache;
    std::string name;  // the cache's key
  };
  enum class State : uint8_t { kHandshaking, kEstablished, kFailed };
  explicit TlsSession(ssl_st* ssl, bool server) noexcept;
  Result<void> attach();  // the BIO and the back-pointers to this object
  void rebind() noexcept;
  void free_ssl() noexcept;
  // The input OpenSSL reads during one call: the kept bytes, then `ciphertext`.
  void begin_input(std::span<const std::byte> ciphertext) noexcept;
  size_t end_input() noexcept;  // bytes taken from the call's span
  std::error_code fail(int ssl_result) noexcept;
  Result<size_t> seal(const std::byte* data, size_t size) noexcept;

  friend struct SessionBio;

  ssl_st* ssl_ = nullptr;
  std::unique_ptr<ClientState> client_;  // a client's cache and name; null on a server
  // The span of the call in progress (begin_input .. end_input).
  const std::byte* input_ = nullptr;
  size_t input_size_ = 0;
  size_t input_taken_ = 0;
  // Ciphertext handed to keep(), read before the call's span; freed once read.
  std::unique_ptr<std::byte[]> kept_;
  size_t kept_size_ = 0;
  size_t kept_taken_ = 0;
  detail::CipherQueue output_;
  std::error_code failure_;
  State state_ = State::kHandshaking;
  bool server_ = false;
  bool closed_ = false;
  bool peer_closed_ = false;
  bool peer_eof_ = false;
  bool renegotiation_refused_ = false;  // OpenSSL sent a no_renegotiation alert
};

}  // namespace ucp::tls
