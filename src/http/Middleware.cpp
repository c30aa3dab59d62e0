// The middleware chain: each stage gets a Next that runs the following one, and the last runs
// the route's handler, or answers 404/405 when no route matched. (The library's middleware
// are in files of their own: AccessLog.cpp, RequestId.cpp, Cors.cpp, Compression.cpp.)

#include "ServerCore.h"

namespace ucp::http {
namespace detail {

Task<> not_routed(Response& response, Router::MethodSet allowed) {
  if (allowed != 0) {
    response.set_status(405);
    response.add_header("Allow", Router::allow_header(allowed));
  } else {
    response.set_status(404);
  }
  response.set_content_type("text/plain");
  response.set_body(allowed != 0 ? "Method Not Allowed\n" : "Not Found\n");
  co_return;
}

}  // namespace detail

// ---- the middleware chain ----

Task<> Next::operator()() {
  // Not a coroutine: it returns the next stage's task, so a chain costs one frame per
  // middleware and one for the handler, nothing for the links between them.
  if (index_ < core_.middleware.size()) {
    return core_.middleware[index_](
        request_, response_, Next(core_, index_ + 1, request_, response_, handler_, allowed_));
  }
  if (handler_ != nullptr) return (*handler_)(request_, response_);
  return detail::not_routed(response_, allowed_);
}

}  // namespace ucp::http
