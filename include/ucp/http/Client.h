#pragma once
// Client: an HTTP/1.1 client for one loop, with a keep-alive pool per origin. Responses are
// read as they arrive (the head first, then the body piece by piece, or whole with a bound),
// request bodies are sent whole or streamed, and every failure is an error value: a refused
// or timed-out connect, timed_out when the server goes silent for timeout_ms, ClientErrc
// (ucp/http/ClientSession.h) for a malformed answer or a closed connection.
//
//   ucp::http::Client client(loop, {.timeout_ms = 5000});
//   auto response = co_await client.get("http://127.0.0.1:8080/healthz");
//   if (!response) co_return log(response.error().message());
//   auto body = co_await response->read_all();          // bounded by max_body_bytes
//
//   ucp::http::ClientRequest upload{.method = "PUT", .url = "http://10.0.0.7/blob"};
//   upload.body_length = size;                          // else chunked
//   upload.body_source = [&]() -> ucp::Task<ucp::Result<std::string_view>> {
//     co_return next_piece();                           // empty: the body has ended
//   };
//   auto put = co_await client.send(std::move(upload));
//   while (auto piece = co_await put->read()) {         // streamed: no whole body in memory
//     if (piece->empty()) break;
//     ...
//   }
//
// A connection goes back to the pool once its response has been read to the end (read()
// returned the empty piece, or read_all()); a response dropped before that closes its
// connection. A request that meets a pooled connection the server had just closed, and got
// no byte of answer, is sent again once on a new connection when that is safe (no body, or a
// body held in `body`).
//
// Redirects are not followed unless max_redirects > 0: then 301, 302, 303, 307 and 308 with a
// Location are followed (http:// and https://), 303 (and 301/302 after a POST) as a GET without
// body, 307/308 with the same method and body (not a streamed one: that 3xx is returned as it is),
// and Authorization and Cookie are dropped when the origin changes.
//
// https:// URLs connect with TLS (ucp/net/TcpClient.h): SNI with the URL's host (not for an
// IP literal), the server's certificate verified against the URL's host, ALPN "http/1.1",
// and a reconnect resumes the context's earlier session with that host. The context is
// options.tls, or one of the system's CAs made at the first https:// request. A refused
// certificate is an error of the tls category (ucp/tls/TlsError.h):
//
//   ucp::tls::TlsClientOptions tls_options;
//   tls_options.ca_file = "/etc/ucp/internal-ca.pem";      // empty: the system's CAs
//   auto tls = ucp::http::Client::tls_context(tls_options);  // check it: a Result
//   ucp::http::ClientOptions options;
//   options.tls = *tls;
//   ucp::http::Client client(loop, options);
//   auto response = co_await client.get("https://api.internal/v1/state");
//   if (!response && response.error() == ucp::tls::Errc::kCertificateVerifyFailed) ...
//
//
// Thread contract: the loop's thread only; the Client must outlive its responses.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/http/ClientSession.h"
#include "ucp/http/ConnectionPool.h"
#include "ucp/io/EventLoop.h"
#include "ucp/tls/TlsOptions.h"

namespace ucp {
class Resolver;
namespace tls {
class TlsContext;
}
}  // namespace ucp

namespace ucp::http {

struct ClientOptions {
  uint32_t connect_timeout_ms = 10000;  // resolution and connect
  uint32_t timeout_ms = 30000;          // each wait for the server's bytes (head or body); 0 = none
  uint32_t max_redirects = 0;           // 0: a 3xx is returned as it is
  uint64_t max_body_bytes = 64 << 20;   // what read_all() accepts
  PoolOptions pool = {.max_idle = 64, .max_idle_per_key = 8, .idle_timeout_ms = 60000};
  SessionLimits limits;
  std::string user_agent = "ucp";  // empty: no User-Agent header
  Resolver* resolver = nullptr;    // host names; null: Resolver::shared()
  /// https:// connections: a client context (Client::tls_context, or tls::TlsContext::client
  /// for full control) with its CAs, client certificate, verification and session cache.
  /// Null: one trusting the system's CAs, with verification on, made at the first https://
  /// request and kept by the client.
  std::shared_ptr<const tls::TlsContext> tls;
};

/// "http[s]://host[:port][/path][?query]" taken apart. IPv6 hosts are written in brackets.
struct ParsedUrl {
  std::string host;  // without brackets, lowercase
  uint16_t port = 80;
  std::string target = "/";  // path and query, as written
  bool https = false;

  /// kBadUrl (and nothing set) for a malformed URL; kUnsupportedScheme for another scheme.
  static Result<ParsedUrl> parse(std::string_view text);
  std::string_view scheme() const noexcept { return https ? "https" : "http"; }
  uint16_t default_port() const noexcept { return https ? 443 : 80; }
  /// "host:port" for the Host header ("[::1]:8080"; the port omitted when the scheme's own).
  std::string authority() const;
  /// The connection pool's key: "http://host:port" or "https://host:port", so that the two
  /// schemes never share a connection.
  std::string origin() const;
};

struct ClientRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // Host is added when absent
  std::string body;  // sent with Content-Length (when there is no body_source)
  /// A body sent as it is produced: each call gives the next piece, an empty one ends it.
  /// With body_length it goes out with that Content-Length, otherwise chunked.
  UniqueFunction<Task<Result<std::string_view>>()> body_source;
  std::optional<uint64_t> body_length;
};

class Client;

/// A response whose head has arrived; the body is read from it. Move-only. It holds its
/// connection until the body has been read to the end, then hands it back to the pool (keeping
/// a copy of the head, which stays readable).
class ClientResponse {
 public:
  ClientResponse(ClientResponse&&) noexcept = default;
  ClientResponse& operator=(ClientResponse&&) noexcept = default;
  ~ClientResponse();

  int status() const noexcept { return head_->status; }
  std::string_view reason() const noexcept { return head_->reason; }
  const ResponseHead& head() const noexcept { return *head_; }
  std::string_view header(std::string_view name) const noexcept { return head_->header(name); }
  /// The URL that answered (the last one, after redirects).
  const std::string& url() const noexcept { return url_; }

  /// The next piece of the body, valid until the next call; empty once it has ended (the
  /// connection then goes back to the pool). After an error the connection is closed.
  Task<Result<std::string_view>> read();
  /// The rest of the body, at most `max_bytes` (ClientErrc::kBodyTooLarge beyond; the
  /// connection is closed then).
  Task<Result<std::string>> read_all();
  Task<Result<std::string>> read_all(uint64_t max_bytes);

 private:
  friend class Client;
  ClientResponse(Client& client, std::unique_ptr<ClientSession> session, std::string key,
                 std::string url);
  /// Lets go of the connection (to the pool when the body has ended and it can be reused),
  /// keeping a copy of the head.
  void release(bool body_ended);

  struct KeptHead {
    std::string bytes;
    ResponseHead head;
  };
  Client* client_;
  std::unique_ptr<ClientSession> session_;
  std::string key_;
  std::string url_;
  const ResponseHead* head_;  // the session's, then kept_'s
  std::unique_ptr<KeptHead> kept_;
  bool ended_ = false;
};

class Client {
 public:
  explicit Client(EventLoop& loop, ClientOptions options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  /// Sends `request` and waits for the response's head (following redirects if asked).
  Task<Result<ClientResponse>> send(ClientRequest request);
  Task<Result<ClientResponse>> get(std::string url);

  EventLoop& loop() const noexcept { return loop_; }
  const ClientOptions& options() const noexcept { return options_; }
  ConnectionPool& pool() noexcept { return pool_; }
  /// Connections made so far (each reuse from the pool is not one).
  uint64_t connections_made() const noexcept { return connections_made_; }

  /// A client TLS context for https:// (ClientOptions::tls): tls::TlsContext::client with
  /// ALPN "http/1.1" when `options` offers none. A failure names the file at fault.
  static Result<std::shared_ptr<const tls::TlsContext>, Error> tls_context(
      tls::TlsClientOptions options);

 private:
  friend class ClientResponse;
  /// One request to one URL, without redirects.
  Task<Result<ClientResponse>> exchange(const ParsedUrl& url, ClientRequest& request,
                                        bool replayable);
  Task<Result<std::unique_ptr<ClientSession>>> connect(const ParsedUrl& url);

  EventLoop& loop_;
  ClientOptions options_;
  ConnectionPool pool_;
  uint64_t connections_made_ = 0;
  std::shared_ptr<const tls::TlsContext> tls_;  // options_.tls, or the default once made
};

}  // namespace ucp::http
