#include "ucp/tls/TlsError.h"

#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace ucp::tls {
namespace {

std::string_view describe(Errc reason) noexcept {
  switch (reason) {
    case Errc::kHandshakeFailed:
      return "TLS handshake failed";
    case Errc::kCertificateVerifyFailed:
      return "TLS certificate verify failed";
    case Errc::kTruncated:
      return "TLS connection truncated (EOF without close_notify)";
    case Errc::kClosed:
      return "TLS session closed (close_notify sent)";
    case Errc::kProtocolError:
      return "TLS protocol error";
    case Errc::kRenegotiationRefused:
      return "TLS renegotiation refused";
    case Errc::kRecordOverflow:
      return "TLS record too long";
    case Errc::kNotTls:
      return "not TLS (plain HTTP sent to a TLS port)";
    case Errc::kHandshakeTimeout:
      return "TLS handshake timed out";
    case Errc::kNotEstablished:
      return "TLS handshake not finished";
    case Errc::kInternal:
      return "TLS internal error";
  }
  return "unknown TLS error";
}

class TlsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tls"; }
  std::string message(int value) const override {
    const auto reason = static_cast<Errc>(value & 0xff);
    const int detail = value >> 8;
    std::string text(describe(reason));
    if (detail == 0) return text;
    const char* why = nullptr;
    if (reason == Errc::kCertificateVerifyFailed) {
      why = X509_verify_cert_error_string(detail);
    } else {
      // The reason strings are loaded with libssl; a message may be asked for before any
      // context was built.
      OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, nullptr);
      why = ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, detail));
    }
    text += ": ";
    text += why != nullptr ? std::string(why) : "reason " + std::to_string(detail);
    return text;
  }
  // A code's condition is its reason without the detail, so `code == Errc::kX` holds for
  // every detail.
  std::error_condition default_error_condition(int value) const noexcept override {
    return {value & 0xff, *this};
  }
};

}  // namespace

const std::error_category& tls_category() noexcept {
  static const TlsCategory category;
  return category;
}

std::string_view to_string(Errc reason) noexcept {
  switch (reason) {
    case Errc::kHandshakeFailed:
      return "handshake_failed";
    case Errc::kCertificateVerifyFailed:
      return "certificate_verify_failed";
    case Errc::kTruncated:
      return "truncated";
    case Errc::kClosed:
      return "closed";
    case Errc::kProtocolError:
      return "protocol_error";
    case Errc::kRenegotiationRefused:
      return "renegotiation_refused";
    case Errc::kRecordOverflow:
      return "record_overflow";
    case Errc::kNotTls:
      return "not_tls";
    case Errc::kHandshakeTimeout:
      return "timeout";
    case Errc::kNotEstablished:
      return "not_established";
    case Errc::kInternal:
      return "internal";
  }
  return "other";
}

}  // namespace ucp::tls
