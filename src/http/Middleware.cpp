// The middleware chain: each stage gets a Next that runs the following one, and the last runs
// the route's handler, or answers 404/405 when no route matched.

#include <chrono>

#include "ucp/log/Logger.h"

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

Middleware access_log(LogLevel level) {
  return [level](Request& request, Response& response, Next next) -> Task<> {
    if (!Logger::enabled(level)) {  // no clock read while the level is off
      co_await next();
      co_return;
    }
    const auto start = std::chrono::steady_clock::now();
    co_await next();
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    UCP_LOG_AT(level, "{} {} {} {} {}us", request.peer() ? request.peer()->to_string() : "-",
               request.method_name(), request.target(), response.status(), micros);
  };
}

}  // namespace ucp::http
