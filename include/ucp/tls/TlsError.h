#pragma once
// The errors of the TLS layer: one std::error_code in the "tls" category per failure, carrying
// its reason and, where there is one, OpenSSL's detail (the alert or the library's reason for a
// failed handshake, the X509 verification result for a refused certificate):
//
//   value:  | detail (OpenSSL reason or X509_V_ERR_*) | Errc (8 bits) |
//
//   if (n.error() == ucp::tls::Errc::kCertificateVerifyFailed)   // any detail
//   LOG_WARN("TLS: {}", n.error().message());  // "certificate verify failed: certificate has
//   expired"
//
// Errc is an error *condition*: `==` compares the reason and ignores the detail.

#include <cstdint>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace ucp::tls {

/// Why a TLS session failed or refused a call.
enum class Errc : uint8_t {
  kHandshakeFailed = 1,      // detail: OpenSSL's reason (e.g. "no shared cipher", an alert)
  kCertificateVerifyFailed,  // detail: X509_V_ERR_* (unknown CA, expired, host name mismatch)
  kTruncated,                // the peer's EOF came without close_notify (never a clean 0)
  kClosed,                   // write after close(): close_notify was queued already
  kProtocolError,            // after the handshake: bad record, unexpected message, alert
  kRenegotiationRefused,     // the peer tried to renegotiate (TLS 1.2); UCP never does
  kRecordOverflow,           // a record longer than TLS allows (16 KiB of plaintext)
  kNotTls,                   // the peer spoke plain HTTP to a TLS port
  kHandshakeTimeout,         // the handshake did not finish in handshake_timeout_ms
  kNotEstablished,           // read/write before the handshake finished (a caller's mistake)
  kInternal,                 // OpenSSL failed inside (out of memory)
};
/// Errc values run from 1 to kErrcCount - 1 (counters index by them).
inline constexpr size_t kErrcCount = static_cast<size_t>(Errc::kInternal) + 1;

const std::error_category& tls_category() noexcept;

/// An error_code of the "tls" category with OpenSSL's detail (0: none).
inline std::error_code make_error_code(Errc reason, int detail = 0) noexcept {
  return {static_cast<int>(reason) | (detail << 8), tls_category()};
}
inline std::error_condition make_error_condition(Errc reason) noexcept {
  return {static_cast<int>(reason), tls_category()};
}

/// The reason of a "tls" error (Errc{} for an error of another category).
inline Errc reason_of(std::error_code error) noexcept {
  if (error.category() != tls_category()) return Errc{};
  return static_cast<Errc>(error.value() & 0xff);
}
/// OpenSSL's detail of a "tls" error: an SSL_R_* reason or an X509_V_ERR_* result; 0 if none.
inline int detail_of(std::error_code error) noexcept {
  if (error.category() != tls_category()) return 0;
  return error.value() >> 8;
}

/// A metrics label for a reason: "handshake_failed", "certificate_verify_failed", ...
std::string_view to_string(Errc reason) noexcept;

}  // namespace ucp::tls

template <>
struct std::is_error_condition_enum<ucp::tls::Errc> : std::true_type {};
