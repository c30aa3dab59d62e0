#pragma once
// RequestId: a middleware that gives every request an id, so that one request can be followed
// through the access log, the application's own log lines and the services it calls.
//
//   server.use(http::access_log());     // {request_id} in its format
//   server.use(http::request_id());
//   router.get("/work", [](Request& req, Response& res) -> Task<> {
//     LOG_INFO("[{}] working", req.id());
//     ...
//   });
//
// The id is the request's X-Request-Id when it is a plausible one (1 to Request::kMaxIdBytes
// characters of [A-Za-z0-9._~:/+=@-]: a UUID, a hex or base64 trace id; a proxy in front
// usually sets it), else a new one: 32 hex digits, a random prefix per thread and a counter,
// unique across threads and restarts without a system call per request. The response carries
// it back in the same header. With `trust_incoming = false` every request gets a new id (a
// server facing clients directly, whose ids should not reach the logs).
//
// Install it before (outside of) the middleware that logs, so that they see the id.
//
// Thread contract: the middleware runs on every worker thread at once.

#include <string>
#include <string_view>

#include "ucp/http/Middleware.h"

namespace ucp::http {

struct RequestIdOptions {
  /// The request header read and the response header written.
  std::string header = "X-Request-Id";
  /// Take a valid id from the request instead of making one.
  bool trust_incoming = true;
  /// Send the id back in the response.
  bool echo = true;
};

Middleware request_id(RequestIdOptions options = {});

/// Whether `id` is one request_id() takes from a request.
bool valid_request_id(std::string_view id) noexcept;

/// Writes a new id (32 hex digits) into `out`, which holds at least 32 bytes; returns it.
std::string_view generate_request_id(char* out) noexcept;

}  // namespace ucp::http
