#pragma once
// TlsContext: an OpenSSL SSL_CTX built from TlsOptions (server) or TlsClientOptions (client),
// with UCP's settings: certificates and their SNI names, ALPN, versions, ciphers, tickets,
// client certificate verification. Sessions (TlsSession) are made from it.
//
//   auto context = ucp::tls::TlsContext::server(options);   // Result<shared_ptr<const ...>>
//   if (!context) { LOG_ERROR("{}", context.error().message); return 2; }
//   auto session = ucp::tls::TlsSession::accept(**context);
//
// Building reads and checks every file: a failure is one line naming the file and what is
// wrong with it ("certificate file /etc/x.pem: no PEM certificate in it", "private key file
// k.pem does not match certificate file c.pem"). Once built it never changes: to load new
// files, build another one (TlsContextHolder swaps them).
//
// Ownership and threads: immutable, so any thread may make sessions from it at the same time
// (SSL_new is thread-safe on a shared SSL_CTX). A session holds OpenSSL's reference to the
// SSL_CTX and everything its callbacks use, so it may outlive this object.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ucp/base/Result.h"
#include "ucp/tls/TlsOptions.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace ucp::tls {

class TlsSessionCache;

namespace detail {
struct ContextState;
}

class TlsContext {
  struct Token {  // the constructor is public for make_shared; only server() and client() call it
    explicit Token() = default;
  };

 public:
  static Result<std::shared_ptr<const TlsContext>, Error> server(const TlsOptions& options);
  static Result<std::shared_ptr<const TlsContext>, Error> client(const TlsClientOptions& options);

  TlsContext(Token, ssl_ctx_st* ctx) noexcept : ctx_(ctx) {}
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  bool is_server() const noexcept;
  /// The ALPN protocols, preferred first (TlsSession::alpn_index() indexes this list).
  std::span<const std::string> alpn_protocols() const noexcept;
  /// A client context's sessions by server name (null for a server): connections made with
  /// TlsSession::connect(context, name, context.session_cache()) resume across reconnects.
  /// Safe from any thread (the cache locks).
  TlsSessionCache* session_cache() const noexcept;
  /// The options' handshake_timeout_ms: connections made with this context fail a handshake
  /// that takes longer (0: no limit).
  uint32_t handshake_timeout_ms() const noexcept;
  /// The ticket keys (server with session tickets on), else null.
  const std::shared_ptr<TicketKeyRing>& ticket_keys() const noexcept;
  /// The SSL_CTX of the default certificate, for settings UCP does not wrap.
  ssl_ctx_st* native_handle() const noexcept { return ctx_; }

 private:
  const detail::ContextState& state() const noexcept;

  ssl_ctx_st* ctx_;  // one reference; the ContextState hangs off it (ex_data)
};

}  // namespace ucp::tls
