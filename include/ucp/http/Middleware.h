#pragma once
// Middleware: code that runs around the handler of every request, in the order added
// (HttpServer::use; the first added runs outermost). It sees the request before the handler
// and the response after it, and may answer by itself without calling the rest:
//
//   server.use([](Request& req, Response& res, Next next) -> Task<> {
//     if (req.header("authorization").empty()) co_return res.reply(401);
//     co_await next();                   // the rest of the chain and the handler (or 404/405)
//     res.add_header("X-Served-By", "ucp");
//   });
//
// The library's own: access_log (AccessLog.h), request_id (RequestId.h), cors (Cors.h),
// compression (Compression.h). A middleware that is not installed costs nothing.
//
// Thread contract: runs on the connection's worker thread, concurrently across connections;
// shared state it captures must be safe for that (read-only after start(), or per thread).

#include <cstddef>
#include <cstdint>

#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/http/Request.h"
#include "ucp/http/Router.h"

namespace ucp::http {

class Response;
class Next;

/// Middleware: runs around the rest of the chain (and the handler). Call `co_await next()`
/// to go on, or answer the request itself without calling it.
using Middleware = UniqueFunction<Task<>(Request&, Response&, Next)>;

namespace detail {
class Connection;
struct ServerCore;
}  // namespace detail

/// The rest of the middleware chain, as handed to a middleware.
class Next {
 public:
  /// Runs the next middleware, or the route's handler (404/405 when there is none).
  Task<> operator()();

 private:
  friend class detail::Connection;
  friend struct detail::ServerCore;
  Next(detail::ServerCore& core, size_t index, Request& request, Response& response,
       Handler* handler, uint16_t allowed) noexcept
      : core_(core),
        index_(index),
        request_(request),
        response_(response),
        handler_(handler),
        allowed_(allowed) {}
  detail::ServerCore& core_;
  size_t index_;
  Request& request_;
  Response& response_;
  Handler* handler_;
  uint16_t allowed_;
};

}  // namespace ucp::http
