#pragma once
// Cors: a middleware that lets web pages of other origins call the server (the Fetch
// standard's CORS protocol): it answers preflight requests itself and marks the responses a
// page of an allowed origin may read.
//
//   server.use(http::cors({
//       .allowed_origins = {"https://app.example.com", "https://*.example.org"},
//       .allowed_headers = {"Content-Type", "Authorization"},
//       .allow_credentials = true,
//   }));
//
// - No Origin header: not a cross-origin request; passed on untouched.
// - A preflight (OPTIONS with Origin and Access-Control-Request-Method) never reaches a
//   handler. Allowed (origin, method and every requested header): 204 with
//   Access-Control-Allow-Origin (the origin; "*" when any origin is allowed without
//   credentials), -Allow-Methods, -Allow-Headers, -Max-Age and, with credentials,
//   -Allow-Credentials. Refused: 403 with a line saying which of the three was refused and
//   none of those headers, so the browser stops there.
// - Any other request from an allowed origin: handled as usual, and the response carries
//   Access-Control-Allow-Origin, -Allow-Credentials and -Expose-Headers. From another origin:
//   handled without them (the browser then keeps the answer from the page).
// - Vary: Origin on every response whose headers depend on the origin (all of them, unless
//   any origin is allowed without credentials), so that a cache does not serve one origin's
//   answer to another.
//
// Origins are compared as browsers send them (scheme://host[:port], case-insensitive); "*"
// allows any; "https://*.example.org" allows every subdomain of example.org over https (not
// example.org itself). "null" (sandboxed pages, file://) is allowed only if listed, and listing
// it is rarely what you want. Any origin together with credentials lets every site on the web
// act as a logged-in user of this one: the middleware allows it (it echoes the origin, as the
// standard requires) but it is almost never right.
//
// Thread contract: the middleware runs on every worker thread at once (read-only options).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/http/Middleware.h"

namespace ucp::http {

struct CorsOptions {
  /// Origins allowed: exact, "*" (any), or "scheme://*.domain" (its subdomains). Empty: none.
  std::vector<std::string> allowed_origins{};
  /// Methods a preflight may ask for (case-sensitive, as methods are).
  std::vector<std::string> allowed_methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  /// Request headers a preflight may ask for (case-insensitive); "*" allows any.
  std::vector<std::string> allowed_headers = {"Content-Type"};
  /// Response headers beyond the CORS-safelisted ones that the page may read.
  std::vector<std::string> exposed_headers{};
  /// Cookies and HTTP authentication go with the requests (Access-Control-Allow-Credentials).
  bool allow_credentials = false;
  /// How long a browser may keep a preflight's answer (Access-Control-Max-Age); 0: not sent.
  uint32_t max_age_seconds = 600;
};

Middleware cors(CorsOptions options);

/// Whether `origin` is one of `allowed` (the rules above). For checks of your own.
bool cors_origin_allowed(const std::vector<std::string>& allowed, std::string_view origin) noexcept;

}  // namespace ucp::http
