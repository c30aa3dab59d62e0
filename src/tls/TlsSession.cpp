#include "ucp/tls/TlsSession.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <new>
#include <utility>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSessionCache.h"

#include "ContextState.h"

namespace ucp::tls {

// The BIO between OpenSSL and a session. Reads copy straight from the ciphertext of the call
// in progress (after what keep() stored); writes append to the session's output. It never
// blocks a write, so SSL_write always takes everything it is given.
struct SessionBio {
  static BIO_METHOD* method() noexcept {
    static BIO_METHOD* const kMethod = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ucp tls session");
      if (m != nullptr) {
        BIO_meth_set_read_ex(m, &read);
        BIO_meth_set_write_ex(m, &write);
        BIO_meth_set_ctrl(m, &ctrl);
        BIO_meth_set_create(m, &create);
      }
      return m;
    }();
    return kMethod;
  }

  static TlsSession& session(BIO* bio) noexcept {
    return *static_cast<TlsSession*>(BIO_get_data(bio));
  }
  // The session of an SSL in a callback: its BIO's data. Not SSL_set_app_data: the ex_data
  // behind it costs every connection two more allocations (about 100 bytes) for as long as it
  // lives.
  static TlsSession* session_of(const SSL* ssl) noexcept {
    BIO* bio = SSL_get_rbio(ssl);
    return bio != nullptr ? static_cast<TlsSession*>(BIO_get_data(bio)) : nullptr;
  }
  static size_t input_left(const TlsSession& s) noexcept {
    return (s.kept_size_ - s.kept_taken_) + (s.input_size_ - s.input_taken_);
  }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static int read(BIO* bio, char* out, size_t length, size_t* read_bytes) {
    TlsSession& s = session(bio);
    BIO_clear_retry_flags(bio);
    size_t n = 0;
    if (s.kept_taken_ < s.kept_size_) {
      n = std::min(length, s.kept_size_ - s.kept_taken_);
      std::memcpy(out, s.kept_.get() + s.kept_taken_, n);
      s.kept_taken_ += n;
    }
    if (n < length && s.input_taken_ < s.input_size_) {
      const size_t m = std::min(length - n, s.input_size_ - s.input_taken_);
      std::memcpy(out + n, s.input_ + s.input_taken_, m);
      s.input_taken_ += m;
      n += m;
    }
    *read_bytes = n;
    if (n > 0) return 1;
    // Nothing left: "try again" until the transport's EOF, then EOF (BIO_CTRL_EOF says 1),
    // which OpenSSL reports as an unexpected EOF unless close_notify came first.
    if (!s.peer_eof_) BIO_set_retry_read(bio);
    return 0;
  }

  static int write(BIO* bio, const char* data, size_t length, size_t* written) {
    BIO_clear_retry_flags(bio);
    try {
      session(bio).output_.append({reinterpret_cast<const std::byte*>(data), length});
    } catch (const std::bad_alloc&) {
      *written = 0;
      return 0;  // no retry flag: OpenSSL fails the call (Errc::kInternal)
    }
    *written = length;
    return 1;
  }

  static long ctrl(BIO* bio, int command, long, void*) {
    switch (command) {
      case BIO_CTRL_FLUSH:  // handshake flights end with a flush: the output is the caller's
        return 1;
      case BIO_CTRL_EOF:
        return session(bio).peer_eof_ && input_left(session(bio)) == 0 ? 1 : 0;
      case BIO_CTRL_PENDING:
        return static_cast<long>(input_left(session(bio)));
      default:  // WPENDING (nothing is held back), push/pop, kTLS queries...
        return 0;
    }
  }

  // OpenSSL answers a renegotiation attempt with a no_renegotiation warning and carries on;
  // UCP ends the session instead (read() reports it): a peer that asks although UCP never
  // renegotiates is broken or hostile.
  static void on_info(const SSL* ssl, int where, int value) {
    if ((where & SSL_CB_WRITE_ALERT) == 0 || (value & 0xff) != SSL_AD_NO_RENEGOTIATION) return;
    TlsSession* self = session_of(ssl);
    if (self != nullptr) self->renegotiation_refused_ = true;
  }

  static int store_session(SSL* ssl, SSL_SESSION* stored) {
    TlsSession* self = session_of(ssl);
    if (self == nullptr || !self->client_ || self->client_->cache == nullptr ||
        SSL_SESSION_is_resumable(stored) != 1) {
      return 0;
    }
    self->client_->cache->store(self->client_->name, stored);
    return 1;  // the cache took OpenSSL's reference
  }
};

int detail::store_client_session(SSL* ssl, SSL_SESSION* session) {
  return SessionBio::store_session(ssl, session);
}

namespace {

constexpr size_t kRecordBytes = 16384;  // TLS's largest plaintext record

// The error queue is per thread and SSL_get_error() reads it: every call into OpenSSL starts
// from an empty one. Looked at first: ERR_clear_error() walks all 16 slots of the queue, about
// 800 instructions, three times per echoed message, on a queue that is nearly always empty.
void clear_errors() noexcept {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

bool is_ip_literal(const std::string& name) {
  unsigned char address[16];
  return inet_pton(AF_INET, name.c_str(), address) == 1 ||
         inet_pton(AF_INET6, name.c_str(), address) == 1;
}

int64_t epoch_seconds(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string name_text(const X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(std::max(0L, length)));
  BIO_free(bio);
  return text;
}

std::vector<std::string> subject_alt_names(X509* certificate) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    auto text = [](const ASN1_STRING* s) {
      return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<size_t>(ASN1_STRING_length(s)));
    };
    switch (name->type) {
      case GEN_DNS:
        out.push_back("DNS:" + text(name->d.dNSName));
        break;
      case GEN_EMAIL:
        out.push_back("email:" + text(name->d.rfc822Name));
        break;
      case GEN_URI:
        out.push_back("URI:" + text(name->d.uniformResourceIdentifier));
        break;
      case GEN_IPADD: {
        const ASN1_OCTET_STRING* ip = name->d.iPAddress;
        char buffer[INET6_ADDRSTRLEN] = {};
        const int length = ASN1_STRING_length(ip);
        const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
        if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(ip), buffer, sizeof buffer)) {
          out.push_back(std::string("IP:") + buffer);
        }
        break;
      }
      default:
        break;
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

bool is_record_overflow(int reason) {
  switch (reason) {
    case SSL_R_ENCRYPTED_LENGTH_TOO_LONG:
    case SSL_R_DATA_LENGTH_TOO_LONG:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_EXCESSIVE_MESSAGE_SIZE:
      return true;
    default:
      return false;
  }
}

}  // namespace

TlsSession::TlsSession(ssl_st* ssl, bool server) noexcept : ssl_(ssl), server_(server) {}

Result<TlsSession> TlsSession::accept(const TlsContext& server) {
  if (!server.is_server()) return Unexpected{std::errc::invalid_argument};
  SSL* ssl = SSL_new(server.native_handle());
  if (ssl == nullptr) {
    ERR_clear_error();
    return Unexpected{make_error_code(Errc::kInternal)};
  }
  TlsSession session(ssl, true);
  SSL_set_accept_state(ssl);
  if (auto attached = session.attach(); !attached) return Unexpected{attached.error()};
  return session;
}

Result<TlsSession> TlsSession::connect(const TlsContext& client, std::string_view server_name,
                                       TlsSessionCache* cache) {
  if (client.is_server()) return Unexpected{std::errc::invalid_argument};
  SSL* ssl = SSL_new(client.native_handle());
  if (ssl == nullptr) {
    ERR_clear_error();
    return Unexpected{make_error_code(Errc::kInternal)};
  }
  TlsSession session(ssl, false);
  SSL_set_connect_state(ssl);
  const std::string name(server_name);
  const bool verify = (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) != 0;
  bool usable = !verify || !name.empty();  // verifying a certificate needs a name to match
  if (!name.empty() && is_ip_literal(name)) {
    // RFC 6066: SNI carries host names only; the certificate must hold the address.
    usable = !verify || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  } else if (!name.empty()) {
    // SSL_set_tlsext_host_name, without the macro's C-style cast.
    usable = SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                      const_cast<char*>(name.c_str())) == 1;
    if (usable && verify) {
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      usable = SSL_set1_host(ssl, name.c_str()) == 1;
    }
  }
  if (!usable) {
    ERR_clear_error();
    return Unexpected{std::errc::invalid_argument};
  }
  if (cache != nullptr) {
    session.client_ = std::make_unique<ClientState>(ClientState{cache, name});
    if (SSL_SESSION* earlier = cache->find(name); earlier != nullptr) {
      SSL_set_session(ssl, earlier);
      SSL_SESSION_free(earlier);
    }
  }
  if (auto attached = session.attach(); !attached) return Unexpected{attached.error()};
  return session;
}

Result<void> TlsSession::attach() {
  BIO_METHOD* method = SessionBio::method();
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    ERR_clear_error();
    return Unexpected{make_error_code(Errc::kInternal)};
  }
  SSL_set_bio(ssl_, bio, bio);  // one BIO both ways; the SSL owns it
  SSL_set_info_callback(ssl_, &SessionBio::on_info);
  rebind();
  return {};
}

void TlsSession::rebind() noexcept {
  if (ssl_ == nullptr) return;
  BIO_set_data(SSL_get_rbio(ssl_), this);
}

TlsSession::TlsSession(TlsSession&& other) noexcept
    : ssl_(std::exchange(other.ssl_, nullptr)),
      client_(std::move(other.client_)),
      kept_(std::move(other.kept_)),
      kept_size_(std::exchange(other.kept_size_, 0)),
      kept_taken_(std::exchange(other.kept_taken_, 0)),
      output_(std::move(other.output_)),
      failure_(other.failure_),
      state_(other.state_),
      server_(other.server_),
      closed_(other.closed_),
      peer_closed_(other.peer_closed_),
      peer_eof_(other.peer_eof_),
      renegotiation_refused_(other.renegotiation_refused_) {
  rebind();
}

TlsSession& TlsSession::operator=(TlsSession&& other) noexcept {
  if (this != &other) {
    free_ssl();
    ssl_ = std::exchange(other.ssl_, nullptr);
    client_ = std::move(other.client_);
    kept_ = std::move(other.kept_);
    kept_size_ = std::exchange(other.kept_size_, 0);
    kept_taken_ = std::exchange(other.kept_taken_, 0);
    output_ = std::move(other.output_);
    failure_ = other.failure_;
    state_ = other.state_;
    server_ = other.server_;
    closed_ = other.closed_;
    peer_closed_ = other.peer_closed_;
    peer_eof_ = other.peer_eof_;
    renegotiation_refused_ = other.renegotiation_refused_;
    rebind();
  }
  return *this;
}

TlsSession::~TlsSession() { free_ssl(); }

void TlsSession::free_ssl() noexcept {
  if (ssl_ == nullptr) return;
  // OpenSSL forgets (marks not resumable) the session of an SSL freed before it sent
  // close_notify, which TLS 1.0 required. Since TLS 1.1 only a failed session must be
  // forgotten: a client connection dropped without close() keeps its ticket usable.
  if (state_ != State::kFailed) SSL_set_shutdown(ssl_, SSL_get_shutdown(ssl_) | SSL_SENT_SHUTDOWN);
  SSL_free(ssl_);
  ssl_ = nullptr;
}

void TlsSession::begin_input(std::span<const std::byte> ciphertext) noexcept {
  input_ = ciphertext.data();
  input_size_ = ciphertext.size();
  input_taken_ = 0;
  clear_errors();
}

size_t TlsSession::end_input() noexcept {
  const size_t taken = input_taken_;
  input_ = nullptr;
  input_size_ = 0;
  input_taken_ = 0;
  if (kept_ && kept_taken_ == kept_size_) {
    kept_.reset();
    kept_size_ = 0;
    kept_taken_ = 0;
  }
  return taken;
}

void TlsSession::keep(std::span<const std::byte> ciphertext) {
  if (ciphertext.empty()) return;
  const size_t left = kept_size_ - kept_taken_;
  auto merged = std::make_unique_for_overwrite<std::byte[]>(left + ciphertext.size());
  if (left > 0) std::memcpy(merged.get(), kept_.get() + kept_taken_, left);
  std::memcpy(merged.get() + left, ciphertext.data(), ciphertext.size());
  kept_ = std::move(merged);
  kept_size_ = left + ciphertext.size();
  kept_taken_ = 0;
}

bool TlsSession::release_buffers() noexcept {
  return ssl_ == nullptr || SSL_free_buffers(ssl_) == 1;
}

bool TlsSession::has_buffered_input() const noexcept {
  return ssl_ != nullptr && (SSL_pending(ssl_) > 0 || kept_taken_ < kept_size_);
}

std::error_code TlsSession::fail(int ssl_error) noexcept {
  // The last error of libssl in the queue says why (a library below it may have queued
  // details first); without one, the first of any library.
  unsigned long first = 0;
  unsigned long ssl_code = 0;
  for (unsigned long code; (code = ERR_get_error()) != 0;) {
    if (first == 0) first = code;
    if (ERR_GET_LIB(code) == ERR_LIB_SSL) ssl_code = code;
  }
  const bool handshaking = state_ != State::kEstablished;
  const Errc generic = handshaking ? Errc::kHandshakeFailed : Errc::kProtocolError;
  std::error_code error;
  if (ssl_code != 0) {
    const int reason = ERR_GET_REASON(ssl_code);
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
      error = make_error_code(Errc::kCertificateVerifyFailed,
                              static_cast<int>(SSL_get_verify_result(ssl_)));
    } else if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      error = make_error_code(Errc::kTruncated);
    } else if (reason == SSL_R_NO_RENEGOTIATION) {
      error = make_error_code(Errc::kRenegotiationRefused, reason);
    } else if (is_record_overflow(reason)) {
      error = make_error_code(Errc::kRecordOverflow, reason);
    } else if (reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST) {
      error = make_error_code(Errc::kNotTls, reason);
    } else if (reason == ERR_R_MALLOC_FAILURE) {
      error = make_error_code(Errc::kInternal);
    } else {
      error = make_error_code(generic, reason);
    }
  } else if (first != 0) {
    error =
        make_error_code(ERR_GET_REASON(first) == ERR_R_MALLOC_FAILURE ? Errc::kInternal : generic);
  } else if (ssl_error == SSL_ERROR_SYSCALL && peer_eof_) {
    error = make_error_code(Errc::kTruncated);
  } else if (ssl_error == SSL_ERROR_ZERO_RETURN) {
    error = make_error_code(generic);  // close_notify before the handshake finished
  } else {
    error = make_error_code(Errc::kInternal);
  }
  state_ = State::kFailed;
  failure_ = error;
  return error;
}

Result<TlsSession::HandshakeStep> TlsSession::handshake(std::span<const std::byte> ciphertext) {
  if (state_ == State::kFailed) return Unexpected{failure_};
  if (state_ == State::kEstablished) return HandshakeStep{0, true};
  begin_input(ciphertext);
  const int result = SSL_do_handshake(ssl_);
  const int ssl_error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, result);
  const size_t consumed = end_input();
  if (result == 1) {
    state_ = State::kEstablished;
    SSL_free_buffers(ssl_);  // no-op while a record is pending
    return HandshakeStep{consumed, true};
  }
  if (ssl_error == SSL_ERROR_WANT_READ) return HandshakeStep{consumed, false};
  return Unexpected{fail(ssl_error)};
}

Result<TlsSession::ReadStep> TlsSession::read(std::span<const std::byte> ciphertext,
                                              std::span<std::byte> plaintext) {
  if (state_ == State::kFailed) return Unexpected{failure_};
  if (state_ != State::kEstablished) return Unexpected{make_error_code(Errc::kNotEstablished)};
  // After close_notify nothing the peer sends counts: discard it.
  if (peer_closed_) return ReadStep{ciphertext.size(), 0, true};
  begin_input(ciphertext);
  size_t produced = 0;
  int ssl_error = SSL_ERROR_NONE;
  while (produced < plaintext.size()) {
    // Every byte given has been read and no record or plaintext waits inside OpenSSL: another
    // call could only say "want read" (a whole SSL_read_ex and SSL_get_error per record).
    // After the transport's EOF it is made, to report the end.
    if (produced > 0 && !peer_eof_ && SessionBio::input_left(*this) == 0 &&
        SSL_has_pending(ssl_) == 0) {
      break;
    }
    size_t n = 0;
    if (SSL_read_ex(ssl_, plaintext.data() + produced, plaintext.size() - produced, &n) == 1) {
      produced += n;
      continue;
    }
    ssl_error = SSL_get_error(ssl_, 0);
    break;
  }
  size_t consumed = end_input();
  if (renegotiation_refused_ && ssl_error != SSL_ERROR_SSL) {
    ERR_clear_error();
    state_ = State::kFailed;
    failure_ = make_error_code(Errc::kRenegotiationRefused, SSL_R_NO_RENEGOTIATION);
    if (produced == 0) return Unexpected{failure_};
    return ReadStep{consumed, produced, peer_closed_};
  }
  if (ssl_error == SSL_ERROR_ZERO_RETURN) {
    peer_closed_ = true;
    consumed = ciphertext.size();
    ERR_clear_error();
  } else if (ssl_error != SSL_ERROR_NONE && ssl_error != SSL_ERROR_WANT_READ) {
    const std::error_code error = fail(ssl_error);
    // The plaintext that came before the error is the caller's; the error is next.
    if (produced == 0) return Unexpected{error};
  }
  return ReadStep{consumed, produced, peer_closed_};
}

Result<size_t> TlsSession::seal(const std::byte* data, size_t size) noexcept {
  clear_errors();
  size_t written = 0;
  if (SSL_write_ex(ssl_, data, size, &written) == 1) return written;
  return Unexpected{fail(SSL_get_error(ssl_, 0))};
}

Result<size_t> TlsSession::write(std::span<const std::byte> plaintext) {
  const iovec one{const_cast<std::byte*>(plaintext.data()), plaintext.size()};
  return write(std::span<const iovec>(&one, 1));
}

Result<size_t> TlsSession::write(std::span<const iovec> plaintext) {
  if (state_ == State::kFailed) return Unexpected{failure_};
  if (closed_) return Unexpected{make_error_code(Errc::kClosed)};
  if (state_ != State::kEstablished) return Unexpected{make_error_code(Errc::kNotEstablished)};
  size_t total = 0;
  // One buffer: OpenSSL cuts it into records itself, no copy.
  if (plaintext.size() == 1) {
    if (plaintext[0].iov_len == 0) return 0;
    return seal(static_cast<const std::byte*>(plaintext[0].iov_base), plaintext[0].iov_len);
  }
  // Several: whole records straight from a buffer when nothing is staged, the rest gathered
  // into a staging buffer, sealed each time it holds a full record and once at the end. On
  // the stack: the call returns only once OpenSSL has sealed everything (the BIO never
  // blocks), and a loop thread's stack has room for one record.
  std::byte stage[kRecordBytes];
  size_t staged = 0;
  for (const iovec& buffer : plaintext) {
    auto* data = static_cast<const std::byte*>(buffer.iov_base);
    size_t left = buffer.iov_len;
    while (left > 0) {
      if (staged == 0 && left >= kRecordBytes) {
        const size_t whole = left - left % kRecordBytes;
        auto sealed = seal(data, whole);
        if (!sealed) return sealed;
        data += whole;
        left -= whole;
        total += whole;
        continue;
      }
      const size_t n = std::min(left, kRecordBytes - staged);
      std::memcpy(stage + staged, data, n);
      staged += n;
      data += n;
      left -= n;
      if (staged == kRecordBytes) {
        auto sealed = seal(stage, staged);
        if (!sealed) return sealed;
        total += staged;
        staged = 0;
      }
    }
  }
  if (staged > 0) {
    auto sealed = seal(stage, staged);
    if (!sealed) return sealed;
    total += staged;
  }
  return total;
}

void TlsSession::close() noexcept {
  if (closed_ || ssl_ == nullptr) return;
  closed_ = true;
  if (state_ != State::kEstablished) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // queues close_notify; the peer's may come later, through read()
  ERR_clear_error();
}

std::string_view TlsSession::version() const noexcept {
  return ssl_ != nullptr ? SSL_get_version(ssl_) : "";
}

TlsVersion TlsSession::protocol() const noexcept {
  return ssl_ != nullptr && SSL_version(ssl_) == TLS1_3_VERSION ? TlsVersion::k1_3
                                                                : TlsVersion::k1_2;
}

std::string_view TlsSession::cipher() const noexcept {
  const SSL_CIPHER* current = ssl_ != nullptr ? SSL_get_current_cipher(ssl_) : nullptr;
  return current != nullptr ? SSL_CIPHER_get_name(current) : "";
}

std::string_view TlsSession::alpn() const noexcept {
  if (ssl_ == nullptr) return {};
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return data != nullptr ? std::string_view(reinterpret_cast<const char*>(data), length)
                         : std::string_view();
}

int TlsSession::alpn_index() const noexcept {
  const std::string_view chosen = alpn();
  if (chosen.empty()) return -1;
  const detail::ContextState* state = detail::context_state(SSL_get_SSL_CTX(ssl_));
  if (state == nullptr) return -1;
  for (size_t i = 0; i < state->alpn.size(); ++i) {
    if (state->alpn[i] == chosen) return static_cast<int>(i);
  }
  return -1;
}

std::string_view TlsSession::server_name() const noexcept {
  const char* name =
      ssl_ != nullptr ? SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name) : nullptr;
  return name != nullptr ? name : "";
}

bool TlsSession::resumed() const noexcept {
  return ssl_ != nullptr && SSL_session_reused(ssl_) == 1;
}

std::optional<PeerCertificate> TlsSession::peer_certificate() const {
  X509* certificate = ssl_ != nullptr ? SSL_get0_peer_certificate(ssl_) : nullptr;
  if (certificate == nullptr) return std::nullopt;
  PeerCertificate out;
  out.subject = name_text(X509_get_subject_name(certificate));
  out.issuer = name_text(X509_get_issuer_name(certificate));
  out.subject_alt_names = subject_alt_names(certificate);
  out.not_before = epoch_seconds(X509_get0_notBefore(certificate));
  out.not_after = epoch_seconds(X509_get0_notAfter(certificate));
  return out;
}

}  // namespace ucp::tls
