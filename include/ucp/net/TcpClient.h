#pragma once
// TcpClient: outgoing TCP connections. What connect() gives is the same TcpConnection a server
// handler gets (read, receive, write, write_all, close...), owned through a ClientConnection.
//
//   ucp::ClientOptions options;
//   options.connect_timeout_ms = 3000;                  // resolution + every address tried
//   auto conn = co_await ucp::TcpClient::connect(loop, "example.com", 80, options);
//   if (!conn) co_return log(conn.error().message());   // connection_refused, timed_out, ...
//   co_await conn->write_all(request);
//   auto n = co_await conn->read(buffer);            // options.read_timeout_ms applies
//   co_await conn->close();                          // or just drop it: see ClientConnection
//
// - Numeric hosts ("10.0.0.7", "::1", "[::1]") are parsed on the spot: no resolver round trip
//   and no allocation beyond the connection. Other names go to a Resolver (getaddrinfo on its
//   threads; the loop never blocks), and the addresses are tried in the order it returns them
//   until one connects, all within connect_timeout_ms.
// - Errors are values: connection_refused, host_unreachable, network_unreachable, timed_out
//   (the timeout passed), operation_canceled (options.stop), a ResolveErrc for a name that does
//   not resolve. With several addresses the last address's error is reported.
// - The socket is non-blocking and close-on-exec, TCP_NODELAY by default, and attached to the
//   loop like an accepted one. The timeout counts from the call to connect().
// - TLS (options.tls, a client context: ucp/tls/TlsContext.h): connect() also runs the
//   handshake before it returns: SNI and verification of the server's certificate against
//   the host name (or options.tls_server_name; an IP literal against the certificate's
//   addresses), ALPN, resumption of the context's earlier session with that name (so a
//   reconnect costs no certificate check and no signature). Its errors are of the tls
//   category: tls::Errc::kCertificateVerifyFailed with the reason (detail_of, message():
//   "TLS certificate verify failed: hostname mismatch"), kHandshakeFailed, kTruncated,
//   kHandshakeTimeout (the context's handshake_timeout_ms, or the connect timeout if it ends
//   first). The connection then reads and writes plaintext; close() sends close_notify.
//
//   auto tls = ucp::tls::TlsContext::client({});            // the system's CAs; once
//   options.tls = *tls;                                     // (check tls first: Result)
//   auto conn = co_await ucp::TcpClient::connect(loop, "example.com", 443, options);
//
// Thread contract: connect() and everything on the connection on `loop`'s thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <sys/socket.h>

#include "ucp/base/Result.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/OutputLimits.h"
#include "ucp/net/TcpConnection.h"

namespace ucp {

class Resolver;
namespace tls {
class TlsContext;
}

// Nothing in ClientOptions points into itself (no std::string): GCC 12 moves the temporary of
// a defaulted ClientOptions argument inside a co_await expression by copying its bytes.
struct ClientOptions {
  uint32_t connect_timeout_ms = 30000;  // resolution plus every connect attempt; 0 = none
  uint32_t read_timeout_ms = 0;         // the connection's reads (TcpConnection); 0 = none
  OutputLimits output;                  // the connection's output queue and write deadline
  bool tcp_nodelay = true;              // small requests must not wait for Nagle
  StopToken stop;                       // cancels the connect (not the connection after it)
  int family = AF_UNSPEC;               // AF_INET / AF_INET6: resolve names to that family only
  Resolver* resolver = nullptr;         // null: Resolver::shared()
  // TLS: a client context (TlsContext::client) shared by the connections it makes; it keeps
  // their sessions by server name for resumption. Null: plain TCP.
  std::shared_ptr<const tls::TlsContext> tls;
  // SNI and the name verified (connect() copies it); empty: the host connected to.
  std::string_view tls_server_name;
};

/// Deleter of a ClientConnection. A connection whose close() has finished is freed at once.
/// One still open is closed in the background: a coroutine spawned on its loop runs close()
/// (queued output is flushed as close() does, then everything in flight is cancelled and
/// reaped) and then frees it, so the destructor's rule — nothing in flight — always holds. If
/// the loop stops first, its shutdown cancels and reaps the I/O and destroys that coroutine,
/// which frees the connection then; dropped after the loop's run() returned, the connection is
/// closed and freed at once. The loop must outlive the handle.
struct ConnectionCloser {
  void operator()(TcpConnection* connection) const noexcept;
};

/// The owner of a connection made by TcpClient (on its loop's thread only).
using ClientConnection = std::unique_ptr<TcpConnection, ConnectionCloser>;

class TcpClient {
 public:
  /// Connects to `host` (a numeric IPv4/IPv6 address or a name) on `port`.
  static Task<Result<ClientConnection>> connect(EventLoop& loop, std::string host, uint16_t port,
                                                ClientOptions options = {});
  /// Connects to `address`: no parsing, no resolver.
  static Task<Result<ClientConnection>> connect(EventLoop& loop, const InetAddress& address,
                                                ClientOptions options = {});
};

}  // namespace ucp
