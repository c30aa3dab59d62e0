#pragma once
// Router: maps a method and a path to a handler. Patterns are literal segments,
// `{name}` parameters (one whole segment each) and a trailing `*` that takes the rest of
// the path (also nothing):
//
//   router.get("/users/{id}", get_user);        // request.param("id")
//   router.post("/users", create_user);
//   router.get("/static/*", serve_file);        // request.param("*"): "css/site.css"
//
// A literal segment wins over a parameter, a parameter over `*`; when the best match has
// no handler for the method, the next best is tried. A path that matches routes of other
// methods only gets 405 with an Allow header listing them; no match at all gets 404. A
// GET route also answers HEAD (the server sends the headers without the body) unless HEAD
// has a route of its own.
//
// Thread contract: add routes before the server starts; then match() is called from every
// worker thread at once, and handlers run concurrently on those threads.

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/Task.h"
#include "ucp/http/Request.h"

namespace ucp::http {

class Response;

/// A request handler: a coroutine that fills in the response (or streams it).
using Handler = UniqueFunction<Task<>(Request&, Response&)>;

/// What a route takes: `ucp::Task<> f(Request&, Response&)`, or a lambda of that shape. A
/// handler of another shape is refused at the line that adds the route.
template <class F>
concept RequestHandler = std::invocable<F&, Request&, Response&> &&
                         std::same_as<std::invoke_result_t<F&, Request&, Response&>, Task<>>;

class Router {
 public:
  /// A set of methods, one bit per Method.
  using MethodSet = uint16_t;

  /// A route's number: its index in routes(). One per pattern (all its methods share it).
  static constexpr uint32_t kNoRoute = UINT32_MAX;

  struct Match {
    Handler* handler = nullptr;  // null: see allowed
    MethodSet allowed = 0;       // when no handler: the methods the path has routes for
    uint32_t route = kNoRoute;   // with a handler: which pattern matched
  };

  Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;
  ~Router();

  /// Adds a route. Throws std::invalid_argument for a malformed pattern (not starting with
  /// '/', `*` before the end, an unnamed or repeated parameter, more than
  /// Request::kMaxParams parameters) or a route that exists already.
  template <RequestHandler F>
  Router& add(Method method, std::string_view pattern, F&& handler) {
    return add_route(method, pattern, Handler(std::forward<F>(handler)));
  }
  template <RequestHandler F>
  Router& get(std::string_view pattern, F&& handler) {
    return add(Method::kGet, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& head(std::string_view pattern, F&& handler) {
    return add(Method::kHead, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& post(std::string_view pattern, F&& handler) {
    return add(Method::kPost, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& put(std::string_view pattern, F&& handler) {
    return add(Method::kPut, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& del(std::string_view pattern, F&& handler) {
    return add(Method::kDelete, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& patch(std::string_view pattern, F&& handler) {
    return add(Method::kPatch, pattern, std::forward<F>(handler));
  }
  template <RequestHandler F>
  Router& options(std::string_view pattern, F&& handler) {
    return add(Method::kOptions, pattern, std::forward<F>(handler));
  }

  /// Finds the handler for `request`'s method and path and stores the route's parameters in
  /// it. No allocation.
  Match match(Request& request) const noexcept;
  /// The Allow header value for `methods` ("GET, HEAD, POST").
  static std::string allow_header(MethodSet methods);
  bool empty() const noexcept;
  /// The patterns, by route number ("/users/{id}"), as first added: what metrics label
  /// requests with (a bounded set, unlike paths).
  const std::vector<std::string>& routes() const noexcept { return routes_; }

  struct Node;  // the trie; opaque (Router.cpp)

 private:
  Router& add_route(Method method, std::string_view pattern, Handler handler);

  std::unique_ptr<Node> root_;
  std::vector<std::string> routes_;
};

}  // namespace ucp::http
