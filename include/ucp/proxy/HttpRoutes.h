#pragma once
// HttpRoutes: which upstream group an HTTP request goes to, by its host and path: the
// gateway's [route.NAME] sections.
//
//   std::vector<HttpRoute> routes = {{"api", "*", "/api/", "api"},
//                                    {"static", "cdn.example.com", "/", "static"}};
//   RouteTable table(routes, "web");            // "web": what no route matches ("": 404)
//   const std::string* group = table.match("cdn.example.com:8080", "/img/a.png");  // "static"
//
// A route matches a request whose host is its `host` (ASCII case-insensitive; the request's
// port is ignored unless the route names one) or any host for "*", and whose path starts with
// its `path_prefix`. Among the matches the longest prefix wins; at equal length a named host
// beats "*", then the route declared first. Paths are compared after percent-decoding and
// dot-segment removal (the caller's job: see HttpProxy), so "/public/../admin" is "/admin".
// A prefix is compared byte for byte: "/api" also matches "/apix"; end it with '/' for a
// directory.
//
// Thread contract: a value; const members from any thread.

#include <string>
#include <string_view>
#include <vector>

#include "ucp/base/Result.h"

namespace ucp::proxy {

struct HttpRoute {
  std::string name;
  std::string host = "*";         // exact host, or "*"
  std::string path_prefix = "/";  // starts with '/'
  std::string upstream;           // the group's name
  friend bool operator==(const HttpRoute&, const HttpRoute&) = default;
};

/// Whether the routes can be served: a name, a host, a prefix starting with '/', an upstream.
/// The message names the route and the field.
Result<void, Error> validate(const std::vector<HttpRoute>& routes);

class RouteTable {
 public:
  RouteTable() = default;
  RouteTable(std::vector<HttpRoute> routes, std::string default_upstream);

  /// The upstream for a request to `host` (its Host header, or the authority of an
  /// absolute-form target) and `path` (normalized); null when nothing matches and there is no
  /// default.
  const std::string* match(std::string_view host, std::string_view path) const noexcept;
  /// The route that matched, or null (the default, or nothing).
  const HttpRoute* match_route(std::string_view host, std::string_view path) const noexcept;
  const std::vector<HttpRoute>& routes() const noexcept { return routes_; }
  const std::string& default_upstream() const noexcept { return default_; }

 private:
  std::vector<HttpRoute> routes_;  // longest prefix first, then named hosts, then declared order
  std::string default_;
};

}  // namespace ucp::proxy
