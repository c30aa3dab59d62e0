#pragma once
// Request: one parsed HTTP/1.1 request, as a handler sees it. Every string_view points into
// the bytes the connection received (or, for a request that arrived in pieces, into the
// connection's bounded copy of them): nothing is copied or allocated per header. The views
// stay valid until the handler's response has been written, i.e. until the handler returns;
// copy what must live longer.
//
//   std::string_view id = request.param("id");             // router: "/users/{id}"
//   std::string_view type = request.header("content-type"); // any case; "" when absent
//   std::string_view body = request.body();                 // whole body, de-chunked
//
// Thread contract: the connection's loop thread only.

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ucp {
class InetAddress;
}
namespace ucp::tls {
class TlsSession;
}

namespace ucp::http {

namespace detail {
class Connection;
class RequestParser;
}  // namespace detail

enum class Method : uint8_t {
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kPatch,
  kOptions,
  kTrace,
  kConnect,
  kOther,  // any other method llhttp knows (PROPFIND, PURGE...); method_name() says which
};
inline constexpr size_t kMethodCount = 10;

/// "GET", "HEAD"...; "OTHER" for Method::kOther.
std::string_view to_string(Method method) noexcept;
/// The method for an exact, case-sensitive token ("GET"); kOther when it is none of ours.
Method method_from_string(std::string_view token) noexcept;

/// ASCII case-insensitive equality, for header names and tokens.
bool iequals(std::string_view a, std::string_view b) noexcept;

struct Header {
  std::string_view name;
  std::string_view value;  // leading and trailing whitespace removed
};

class Request {
 public:
  /// Header fields a request may carry (trailers included); more are refused with 431.
  static constexpr size_t kMaxHeaders = 100;
  /// `{name}` parameters a route may capture.
  static constexpr size_t kMaxParams = 8;

  Method method() const noexcept { return method_; }
  std::string_view method_name() const noexcept { return method_name_; }
  /// The request-target as received: "/a/b?x=1", "http://host/a", "*".
  std::string_view target() const noexcept { return target_; }
  /// The path of the target, still percent-encoded ("/a%20b"); "*" for OPTIONS *.
  std::string_view path() const noexcept { return path_; }
  /// What follows '?' in the target (without it); empty when there is none.
  std::string_view query() const noexcept { return query_; }
  /// The host the request is for: from an absolute-form target, else the Host header.
  std::string_view host() const noexcept { return host_; }
  /// HTTP/1.<minor>: 0 or 1.
  int version_minor() const noexcept { return version_minor_; }
  /// Whether the connection stays open after the response (HTTP/1.1 default; HTTP/1.0 only
  /// with "Connection: keep-alive"; "close" in any Connection header ends it).
  bool keep_alive() const noexcept { return keep_alive_; }

  /// The first header named `name` (ASCII case-insensitive), or "" when absent.
  std::string_view header(std::string_view name) const noexcept;
  bool has_header(std::string_view name) const noexcept;
  std::span<const Header> headers() const noexcept { return {fields(), header_count_}; }
  /// Trailer fields that followed a chunked body.
  std::span<const Header> trailers() const noexcept {
    return {fields() + header_count_, trailer_count_};
  }
  /// The whole body (Content-Length or de-chunked); empty when there is none.
  std::string_view body() const noexcept { return body_; }

  /// A `{name}` route parameter (still percent-encoded), or "" when the route has none by
  /// that name. A trailing `*` in the pattern is param("*").
  std::string_view param(std::string_view name) const noexcept;
  /// The parameter percent-decoded ("/chat/my%20room": "my room"; a '+' stays a '+', as
  /// paths have it), or nullopt when its escapes are malformed ("%zz") or decode to NUL.
  /// "" when the route has no such parameter.
  std::optional<std::string> decoded_param(std::string_view name) const;
  /// The parameter, or nullopt when the matched route has none by that name (a trailing `*`
  /// is "*"): an empty parameter and an absent one told apart.
  std::optional<std::string_view> find_param(std::string_view name) const noexcept;
  bool has_param(std::string_view name) const noexcept { return find_param(name).has_value(); }

  /// The request's id (the request_id() middleware sets it: taken from the request's
  /// X-Request-Id or generated), or "" without that middleware. Valid as long as the request.
  std::string_view id() const noexcept { return {id_, id_size_}; }
  /// Longest id set_id() keeps.
  static constexpr size_t kMaxIdBytes = 64;
  /// Sets the id (copied); false, and the id unchanged, when it is longer than kMaxIdBytes.
  bool set_id(std::string_view id) noexcept;
  /// The peer's address, or null outside a connection (tests).
  const InetAddress* peer() const noexcept { return peer_; }
  /// HTTPS: the connection's TLS session (version, ALPN, SNI name, the client's certificate
  /// with its subject, subjectAltNames and expiry: peer_certificate()); null over plain HTTP.
  const tls::TlsSession* tls() const noexcept { return tls_; }

 private:
  friend class detail::RequestParser;
  friend class Router;
  friend class detail::Connection;
  struct Param {
    std::string_view name;
    std::string_view value;
  };

  std::string_view method_name_;
  std::string_view target_;
  std::string_view path_;
  std::string_view query_;
  std::string_view host_;
  std::string_view body_;
  const InetAddress* peer_ = nullptr;
  const tls::TlsSession* tls_ = nullptr;
  uint32_t header_count_ = 0;
  uint32_t trailer_count_ = 0;
  uint32_t param_count_ = 0;
  uint32_t id_size_ = 0;
  Method method_ = Method::kGet;
  uint8_t version_minor_ = 1;
  bool keep_alive_ = true;
  Param params_[kMaxParams];
  char id_[kMaxIdBytes];
  // Headers, then trailers. Raw storage: a request starts with none, and clearing 3 KiB for
  // every request would cost more than parsing a small one.
  alignas(Header) std::byte field_storage_[sizeof(Header) * kMaxHeaders];

  const Header* fields() const noexcept {
    return std::launder(reinterpret_cast<const Header*>(field_storage_));
  }
  Header* fields() noexcept { return std::launder(reinterpret_cast<Header*>(field_storage_)); }
};

}  // namespace ucp::http
