#pragma once
// How the HTTP mode rewrites the heads it passes on (RFC 9110 §7.6): the fields that belong to
// one connection (hop-by-hop: Connection, Proxy-Connection, Keep-Alive, TE, Transfer-Encoding,
// Upgrade, and every field a Connection field names) stay on their side; the framing is the
// gateway's own on each side; the client is named to the upstream in X-Forwarded-For,
// X-Forwarded-Proto and Forwarded (RFC 7239). Private to src/proxy.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ucp/http/ClientSession.h"
#include "ucp/http/Request.h"
#include "ucp/net/InetAddress.h"

namespace ucp::proxy::detail {

/// The field names the gateway treats apart, found with one comparison at most (the header
/// loops ask this once per field instead of comparing the name with each).
enum class FieldName : uint8_t {
  kOther,
  kHost,
  kConnection,
  kProxyConnection,
  kKeepAlive,
  kTe,
  kTransferEncoding,
  kUpgrade,
  kContentLength,
  kExpect,
  kXForwardedFor,
  kXForwardedProto,
  kForwarded,
};
FieldName classify(std::string_view name) noexcept;
/// Connection, Proxy-Connection, Keep-Alive, TE, Transfer-Encoding, Upgrade.
bool is_hop_by_hop(FieldName kind) noexcept;

/// The connection-specific fields of one message. Made once per message: it finds the
/// Connection fields up front, so that asking about each field costs a look at those only.
class HopByHop {
 public:
  explicit HopByHop(std::span<const http::Header> fields) noexcept;
  /// A field that must not be passed on (hop-by-hop or named by a Connection field). Host is
  /// never one, whatever Connection names.
  bool contains(std::string_view name) const noexcept;
  /// The same, for a name classify() gave `kind`.
  bool contains(std::string_view name, FieldName kind) const noexcept;
  /// Whether a Connection field lists `token` ("upgrade", "close").
  bool connection_lists(std::string_view token) const noexcept;

 private:
  static constexpr size_t kMaxConnectionFields = 8;
  std::span<const http::Header> fields_;
  std::array<std::string_view, kMaxConnectionFields> connection_{};
  size_t connection_count_ = 0;
  bool more_ = false;  // more Connection fields than that: look through fields_ instead
};

/// The client's IP address as X-Forwarded-For writes it ("10.0.0.7", "2001:db8::1"; an
/// IPv4-mapped IPv6 address as IPv4).
std::string client_ip(const InetAddress& client);

/// A WebSocket upgrade (RFC 6455 §4.1): a GET with "Upgrade: websocket" and "upgrade" in
/// Connection.
bool is_websocket_upgrade(const http::Request& request) noexcept;

struct UpstreamHead {
  const http::Request& request;
  std::string_view client_ip;  // client_ip()
  std::string_view proto = "http";
  http::BodyFraming framing = http::BodyFraming::kNone;
  uint64_t content_length = 0;
  bool websocket = false;  // pass the upgrade on
};

/// The request head for the upstream: the request line in origin-form (an absolute-form
/// target is split into Host and path), the client's end-to-end fields, Host, the forwarding
/// fields (X-Forwarded-For and Forwarded appended to what came in, X-Forwarded-Proto set), the
/// framing, and for a WebSocket upgrade "Connection: Upgrade" and its Upgrade. Expect is not
/// passed (the gateway answers 100 Continue itself).
void append_upstream_head(std::string& out, const UpstreamHead& head);

/// How the gateway frames a response body to its client.
enum class ClientFraming : uint8_t { kNone, kLength, kChunked, kUntilClose };

/// The framing for a client speaking HTTP/1.`client_minor` of a response the upstream framed
/// as `head` says: a length stays a length; chunked, or until the upstream's close, becomes
/// chunked for HTTP/1.1 and until the close for HTTP/1.0.
ClientFraming client_framing(const http::ResponseHead& head, int client_minor) noexcept;

struct ClientHead {
  const http::ResponseHead& response;
  ClientFraming framing = ClientFraming::kNone;
  bool keep_alive = true;  // the connection stays open after this response
  int client_minor = 1;
  bool upgrade = false;  // a 101 the gateway passes on: Connection: Upgrade and its Upgrade
};

/// The response head for the client: the status line (HTTP/1.1), the upstream's end-to-end
/// fields, the framing and the gateway's Connection.
void append_client_head(std::string& out, const ClientHead& head);

/// A response the gateway makes itself (404, 502, 503, 504...): a short text body.
void append_status_response(std::string& out, int status, bool keep_alive, int client_minor = 1);

}  // namespace ucp::proxy::detail
