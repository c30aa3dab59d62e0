#pragma once
// TlsTestClient: a blocking TLS client made with OpenSSL's own socket BIO, for tests of UCP's
// TLS connections from the outside (nothing of UCP's TLS code on this side). Every wait is
// bounded by the socket's send and receive timeouts (kTimeoutMs), so no call can hang a test.
//
//   auto client = ucp::test::TlsTestClient::connect(port, {.ca_file = pki.ca_file});
//   ASSERT_TRUE(client) << client.error();
//   client->write("hello");
//   auto got = client->read_exact(5);     // got.data, got.closed (close_notify), got.error
//
// Tests link OpenSSL::SSL and OpenSSL::Crypto.

#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "LoopbackClient.h"

namespace ucp::test {

struct TlsClientSettings {
  std::string ca_file;                    // empty: no verification
  std::string server_name = "localhost";  // SNI and the name verified
  std::vector<std::string> alpn;          // offered, preferred first
  int version = 0;                        // TLS1_2_VERSION or TLS1_3_VERSION pins it; 0: any
  std::string certificate;                // a client certificate (PEM), with its key
  std::string private_key;
  SSL_SESSION* resume = nullptr;           // a session from an earlier connection (not taken over)
  std::function<void()> before_handshake;  // called just before the ClientHello is sent
};

/// What one read gave: bytes, the peer's close_notify, or a failure (OpenSSL's reason).
struct TlsRead {
  std::string data;
  bool closed = false;  // close_notify received
  std::string error;    // non-empty: EOF without close_notify, a reset, an alert, a timeout
};

inline std::string openssl_errors() {
  std::string text;
  for (unsigned long code; (code = ERR_get_error()) != 0;) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text;
}

class TlsTestClient {
 public:
  static constexpr int kTimeoutMs = 10000;

  /// Connects to 127.0.0.1:`port` and runs the handshake. The error is OpenSSL's reason.
  static TlsTestClient connect(uint16_t port, const TlsClientSettings& settings) {
    TlsTestClient client;
    client.fd_ = connect_tcp(port);
    if (client.fd_ < 0) {
      client.error_ = "connect failed";
      return client;
    }
    client.handshake(settings);
    return client;
  }

  TlsTestClient(TlsTestClient&& other) noexcept
      : ctx_(std::exchange(other.ctx_, nullptr)),
        ssl_(std::exchange(other.ssl_, nullptr)),
        fd_(std::exchange(other.fd_, -1)),
        error_(std::move(other.error_)) {}
  TlsTestClient& operator=(TlsTestClient&&) = delete;
  ~TlsTestClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }

  /// The handshake succeeded.
  explicit operator bool() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  SSL* ssl() const { return ssl_; }
  int fd() const { return fd_; }

  bool write(std::string_view data) {
    size_t written = 0;
    return data.empty() ||
           (retrying([&] { return SSL_write_ex(ssl_, data.data(), data.size(), &written); }) == 1 &&
            written == data.size());
  }
  /// One SSL_read of at most `max` bytes.
  TlsRead read_some(size_t max = 65536) {
    TlsRead out;
    std::string buffer(max, '\0');
    size_t n = 0;
    ERR_clear_error();
    if (retrying([&] { return SSL_read_ex(ssl_, buffer.data(), buffer.size(), &n); }) == 1) {
      out.data.assign(buffer.data(), n);
      return out;
    }
    const int reason = SSL_get_error(ssl_, 0);
    if (reason == SSL_ERROR_ZERO_RETURN) {
      out.closed = true;
    } else {
      out.error = "SSL_get_error " + std::to_string(reason) + ": " + openssl_errors();
      if (out.error.size() < 20) out.error += " (EOF or timeout)";
    }
    return out;
  }
  /// Reads until `size` bytes came, or the end or an error.
  TlsRead read_exact(size_t size) {
    TlsRead out;
    while (out.data.size() < size) {
      TlsRead part = read_some(size - out.data.size());
      out.data += part.data;
      if (part.closed || !part.error.empty()) {
        out.closed = part.closed;
        out.error = part.error;
        break;
      }
    }
    return out;
  }
  /// Reads until close_notify or an error; everything read before it.
  TlsRead read_to_end() {
    TlsRead out;
    for (;;) {
      TlsRead part = read_some();
      out.data += part.data;
      if (part.closed || !part.error.empty()) {
        out.closed = part.closed;
        out.error = part.error;
        return out;
      }
    }
  }
  /// Sends close_notify.
  void close_notify() {
    retrying([&] { return SSL_shutdown(ssl_) >= 0 ? 1 : -1; });
  }
  /// The socket's FIN, without close_notify.
  void shutdown_without_close_notify() { ::shutdown(fd_, SHUT_WR); }
  /// The session, for a later connection's settings.resume (the caller frees it).
  SSL_SESSION* session() const { return SSL_get1_session(ssl_); }

 private:
  TlsTestClient() = default;

  // A blocking call interrupted (EINTR: an io_uring loop in the same process can interrupt
  // this thread's system calls) reads as "retry"; the socket timeouts still bound each wait.
  template <class Call>
  int retrying(Call call) {
    for (int attempt = 0;; ++attempt) {
      errno = 0;
      const int result = call();
      if (result == 1 || attempt == 1000) return result;
      const int reason = SSL_get_error(ssl_, result);
      const bool interrupted = reason == SSL_ERROR_WANT_READ || reason == SSL_ERROR_WANT_WRITE ||
                               (reason == SSL_ERROR_SYSCALL && errno == EINTR);
      if (!interrupted || errno == EAGAIN) return result;
    }
  }

  static int connect_tcp(uint16_t port) {
    auto connected = ucp::test::connect_loopback(port);  // non-blocking, EINTR-proof, bounded
    if (!connected) return -1;
    const int fd = connected->release();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    timeval timeout{kTimeoutMs / 1000, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    return fd;
  }

  void handshake(const TlsClientSettings& settings) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (settings.version != 0) {
      SSL_CTX_set_min_proto_version(ctx_, settings.version);
      SSL_CTX_set_max_proto_version(ctx_, settings.version);
    }
    if (!settings.ca_file.empty()) {
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
      if (SSL_CTX_load_verify_locations(ctx_, settings.ca_file.c_str(), nullptr) != 1) {
        error_ = "CA file: " + openssl_errors();
        return;
      }
    }
    if (!settings.certificate.empty() &&
        (SSL_CTX_use_certificate_chain_file(ctx_, settings.certificate.c_str()) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx_, settings.private_key.c_str(), SSL_FILETYPE_PEM) != 1)) {
      error_ = "client certificate: " + openssl_errors();
      return;
    }
    if (!settings.alpn.empty()) {
      std::string wire;
      for (const auto& protocol : settings.alpn) {
        wire += static_cast<char>(protocol.size());
        wire += protocol;
      }
      SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned int>(wire.size()));
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (!settings.server_name.empty()) {
      SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(settings.server_name.c_str()));
      if (!settings.ca_file.empty()) SSL_set1_host(ssl_, settings.server_name.c_str());
    }
    if (settings.resume != nullptr) SSL_set_session(ssl_, settings.resume);
    if (settings.before_handshake) settings.before_handshake();
    ERR_clear_error();
    if (retrying([&] { return SSL_connect(ssl_); }) != 1) {
      error_ = "handshake: " + openssl_errors();
      if (error_.size() < 12) error_ += "(EOF or timeout)";
    }
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string error_;
};

}  // namespace ucp::test
