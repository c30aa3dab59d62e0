#pragma once
// What a TlsContext's OpenSSL callbacks need (the SNI table, the ALPN list, the ticket keys),
// kept with the SSL_CTX rather than with the TlsContext object: sessions hold references to
// their SSL_CTX, not to the TlsContext, so the state must live as long as the SSL_CTX does.
//
//   main SSL_CTX (default certificate) --ex_data owner--> ContextState --owns--> SNI SSL_CTXs
//   every SSL_CTX of the context       --ex_data view---> ContextState
//
// The main SSL_CTX's owner slot frees the state when OpenSSL frees the SSL_CTX, that is after
// the TlsContext and the last session made from it are gone (a session switched to an SNI
// SSL_CTX still holds the main one as its session context).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "ucp/tls/TicketKeyRing.h"
#include "ucp/tls/TlsSessionCache.h"

namespace ucp::tls::detail {

template <auto Free>
struct OpenSslFree {
  template <class T>
  void operator()(T* object) const noexcept {
    Free(object);
  }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, OpenSslFree<SSL_CTX_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslFree<X509_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, OpenSslFree<BIO_free>>;

struct ContextState {
  /// One certificate and the DNS names SNI matches it by (lower case).
  struct Certificate {
    SSL_CTX* ctx = nullptr;              // owned, except the main one (entry 0)
    std::vector<std::string> exact;      // "api.example.com"
    std::vector<std::string> wildcards;  // "*.example.com" kept as ".example.com"
  };

  bool server = false;
  std::vector<std::string> alpn;
  std::vector<unsigned char> alpn_wire;  // RFC 7301 encoding: length-prefixed names
  std::shared_ptr<TicketKeyRing> ticket_keys;
  std::vector<Certificate> certificates;      // [0]: the default, the main SSL_CTX
  uint32_t handshake_timeout_ms = 0;          // for the connection layer (TlsContext accessor)
  std::unique_ptr<TlsSessionCache> sessions;  // a client's: reconnects resume

  ContextState() = default;
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;
  ~ContextState() {
    for (size_t i = 1; i < certificates.size(); ++i) SSL_CTX_free(certificates[i].ctx);
  }

  /// The certificate entry for an SNI name (exact names first, then wildcards; 0 if none).
  size_t certificate_for(std::string_view server_name) const noexcept;
};

/// A client SSL_CTX's new-session callback: stores the session in the TlsSessionCache the
/// connection named (TlsSession.cpp).
int store_client_session(SSL* ssl, SSL_SESSION* session);

/// The state of any SSL_CTX of a UCP context (null for an SSL_CTX UCP did not make).
const ContextState* context_state(const SSL_CTX* ctx) noexcept;

}  // namespace ucp::tls::detail
