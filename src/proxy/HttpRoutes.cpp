#include "ucp/proxy/HttpRoutes.h"

#include <algorithm>

namespace ucp::proxy {
namespace {

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

/// "example.com:8080" -> "example.com"; "[::1]:80" -> "[::1]".
std::string_view without_port(std::string_view host) noexcept {
  const size_t bracket = host.rfind(']');
  const size_t colon = host.rfind(':');
  if (colon == std::string_view::npos) return host;
  if (bracket != std::string_view::npos && colon < bracket) return host;
  if (bracket == std::string_view::npos && host.find(':') != colon) return host;  // bare IPv6
  return host.substr(0, colon);
}

bool host_matches(const HttpRoute& route, std::string_view host) noexcept {
  if (route.host == "*") return true;
  if (route.host.find(':') != std::string::npos && route.host.front() != '[') {
    return iequals(route.host, host);  // the route names a port
  }
  if (route.host.front() == '[' && route.host.find("]:") != std::string::npos) {
    return iequals(route.host, host);
  }
  return iequals(route.host, without_port(host));
}

Error invalid(const HttpRoute& route, const std::string& what) {
  return Error("route." + route.name + ": " + what,
               std::make_error_code(std::errc::invalid_argument));
}

}  // namespace

Result<void, Error> validate(const std::vector<HttpRoute>& routes) {
  for (const HttpRoute& route : routes) {
    if (route.name.empty()) {
      return Unexpected{
          Error("a route without a name", std::make_error_code(std::errc::invalid_argument))};
    }
    if (route.host.empty()) return Unexpected{invalid(route, "host: empty (use * for any)")};
    if (route.path_prefix.empty() || route.path_prefix.front() != '/') {
      return Unexpected{invalid(route, "path_prefix: must start with '/'")};
    }
    if (route.upstream.empty()) return Unexpected{invalid(route, "upstream: no group named")};
  }
  return {};
}

RouteTable::RouteTable(std::vector<HttpRoute> routes, std::string default_upstream)
    : routes_(std::move(routes)), default_(std::move(default_upstream)) {
  std::stable_sort(routes_.begin(), routes_.end(), [](const HttpRoute& a, const HttpRoute& b) {
    if (a.path_prefix.size() != b.path_prefix.size()) {
      return a.path_prefix.size() > b.path_prefix.size();
    }
    return a.host != "*" && b.host == "*";
  });
}

const HttpRoute* RouteTable::match_route(std::string_view host,
                                         std::string_view path) const noexcept {
  for (const HttpRoute& route : routes_) {
    if (path.substr(0, route.path_prefix.size()) == route.path_prefix &&
        host_matches(route, host)) {
      return &route;
    }
  }
  return nullptr;
}

const std::string* RouteTable::match(std::string_view host, std::string_view path) const noexcept {
  if (const HttpRoute* route = match_route(host, path)) return &route->upstream;
  return default_.empty() ? nullptr : &default_;
}

}  // namespace ucp::proxy
