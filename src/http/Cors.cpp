#include "ucp/http/Cors.h"

#include <memory>
#include <utility>

#include "ucp/http/Request.h"
#include "ucp/http/Response.h"

#include "TokenList.h"

namespace ucp::http {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string line;
  for (const std::string& item : items) line.append(line.empty() ? "" : ", ").append(item);
  return line;
}

bool listed(const std::vector<std::string>& items, std::string_view item, bool exact_case) {
  for (const std::string& candidate : items) {
    if (candidate == "*" || (exact_case ? candidate == item : iequals(candidate, item)))
      return true;
  }
  return false;
}

/// "https://*.example.org" against "https://a.b.example.org": same scheme, and a host that
/// ends with ".example.org" after at least one label.
bool wildcard_matches(std::string_view pattern, std::string_view origin) noexcept {
  const size_t star = pattern.find("://*.");
  if (star == std::string_view::npos) return false;
  const std::string_view scheme = pattern.substr(0, star + 3);  // "https://"
  const std::string_view domain = pattern.substr(star + 4);     // ".example.org"
  if (origin.size() <= scheme.size() + domain.size()) return false;
  if (!iequals(origin.substr(0, scheme.size()), scheme)) return false;
  const std::string_view host = origin.substr(scheme.size());
  if (!iequals(host.substr(host.size() - domain.size()), domain)) return false;
  const std::string_view labels = host.substr(0, host.size() - domain.size());
  return labels.find_first_of("/:@") == std::string_view::npos && labels.front() != '.';
}

/// The options, with the lists joined once for the headers.
struct Policy {
  CorsOptions options;
  bool any_origin = false;
  bool any_header = false;
  std::string methods;
  std::string headers;
  std::string exposed;
  std::string max_age;

  explicit Policy(CorsOptions o) : options(std::move(o)) {
    any_origin = listed(options.allowed_origins, "*", true);
    any_header = listed(options.allowed_headers, "*", true);
    methods = join(options.allowed_methods);
    headers = join(options.allowed_headers);
    exposed = join(options.exposed_headers);
    if (options.max_age_seconds > 0) max_age = std::to_string(options.max_age_seconds);
  }
  /// With credentials the origin itself, never "*" (the standard forbids the pair).
  bool star() const noexcept { return any_origin && !options.allow_credentials; }

  void allow_origin(Response& response, std::string_view origin) const {
    response.set_header("Access-Control-Allow-Origin", star() ? std::string_view("*") : origin);
    if (options.allow_credentials) response.set_header("Access-Control-Allow-Credentials", "true");
  }

  /// The preflight's answer: 204 with the grants, or 403 saying what was refused.
  void preflight(const Request& request, Response& response, std::string_view origin) const {
    const std::string_view method = trim(request.header("access-control-request-method"));
    const std::string_view asked = request.header("access-control-request-headers");
    const char* refused = nullptr;
    if (!cors_origin_allowed(options.allowed_origins, origin)) {
      refused = "CORS: origin not allowed\n";
    } else if (!listed(options.allowed_methods, method, true)) {
      refused = "CORS: method not allowed\n";
    } else if (!any_header && !detail::for_each_element(asked, [this](std::string_view name) {
                 return listed(options.allowed_headers, name, false);
               })) {
      refused = "CORS: request header not allowed\n";
    }
    if (refused != nullptr) {
      response.set_status(403);
      response.set_content_type("text/plain; charset=utf-8");
      response.set_body(refused);
      return;
    }
    response.set_status(204);
    allow_origin(response, origin);
    response.set_header("Access-Control-Allow-Methods", methods);
    // "*" means any header only without credentials: echo what was asked instead.
    if (!asked.empty()) {
      response.set_header("Access-Control-Allow-Headers", any_header ? asked : headers);
    }
    if (!max_age.empty()) response.set_header("Access-Control-Max-Age", max_age);
  }

  static std::string_view trim(std::string_view text) noexcept { return detail::trim_ows(text); }
};

}  // namespace

bool cors_origin_allowed(const std::vector<std::string>& allowed,
                         std::string_view origin) noexcept {
  if (origin.empty()) return false;
  for (const std::string& candidate : allowed) {
    if (candidate == "*" ? origin != "null" : iequals(candidate, origin)) return true;
    if (wildcard_matches(candidate, origin)) return true;
  }
  return false;
}

Middleware cors(CorsOptions options) {
  // Shared by the copies UniqueFunction may make; read-only from here on.
  auto policy = std::make_shared<const Policy>(std::move(options));
  return [policy](Request& request, Response& response, Next next) -> Task<> {
    const std::string_view origin = request.header("origin");
    if (origin.empty()) {
      co_await next();
      co_return;
    }
    if (!policy->star()) response.add_vary("Origin");
    if (request.method() == Method::kOptions &&
        request.has_header("access-control-request-method")) {
      response.add_vary("Access-Control-Request-Method");
      response.add_vary("Access-Control-Request-Headers");
      policy->preflight(request, response, origin);
      co_return;
    }
    // Before the handler, so that a stream's head carries them too.
    if (cors_origin_allowed(policy->options.allowed_origins, origin)) {
      policy->allow_origin(response, origin);
      if (!policy->exposed.empty()) {
        response.set_header("Access-Control-Expose-Headers", policy->exposed);
      }
    }
    co_await next();
  };
}

}  // namespace ucp::http
