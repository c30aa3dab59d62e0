// Router: literal, {name} and trailing * patterns, precedence, 404/405 and HEAD. Requests
// come from the real parser.

#include "ucp/http/Router.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "ucp/http/Response.h"

#include "RequestParser.h"

namespace ucp::http {
namespace {

/// A handler that records which route answered (its tag) in the response status.
Handler tagged(int tag) {
  return [tag](Request&, Response& response) -> Task<> {
    response.set_status(tag);
    co_return;
  };
}

struct Matched {
  int tag = 0;  // the answering route's tag, 0 = none
  Router::MethodSet allowed = 0;
  std::string params;  // "name=value;"
};

Matched match(Router& router, const std::string& method, const std::string& target) {
  detail::RequestParser parser(detail::ParserLimits{});
  const std::string text = method + " " + target + " HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string_view input(text);
  EXPECT_EQ(parser.feed(input), detail::RequestParser::Event::kRequest) << text;
  Request& request = parser.request();
  const Router::Match m = router.match(request);
  Matched out;
  out.allowed = m.allowed;
  if (m.handler != nullptr) {
    Response response;
    Task<> task = (*m.handler)(request, response);
    // The tagged handlers finish without suspending: run them to completion by hand.
    auto handle = task.release();
    handle.resume();
    EXPECT_TRUE(handle.done());
    handle.destroy();
    out.tag = response.status();
  }
  for (const char* name : {"id", "post", "name", "*"}) {
    if (!request.param(name).empty() || (std::string(name) == "*" && out.tag == 7)) {
      out.params += std::string(name) + "=" + std::string(request.param(name)) + ";";
    }
  }
  return out;
}

Router::MethodSet bits(std::initializer_list<Method> methods) {
  Router::MethodSet set = 0;
  for (Method m : methods)
    set = static_cast<Router::MethodSet>(set | 1u << static_cast<unsigned>(m));
  return set;
}

TEST(Router, MatchesLiteralsParametersAndWildcards) {
  Router router;
  router.get("/", tagged(1));
  router.get("/users", tagged(2));
  router.get("/users/{id}", tagged(3));
  router.get("/users/{id}/posts/{post}", tagged(4));
  router.get("/users/me", tagged(5));
  router.get("/users/", tagged(6));
  router.get("/static/*", tagged(7));
  EXPECT_EQ(match(router, "GET", "/").tag, 1);
  EXPECT_EQ(match(router, "GET", "/users").tag, 2);
  EXPECT_EQ(match(router, "GET", "/users/").tag, 6);
  auto user = match(router, "GET", "/users/42");
  EXPECT_EQ(user.tag, 3);
  EXPECT_EQ(user.params, "id=42;");
  auto post = match(router, "GET", "/users/42/posts/7?x=1");
  EXPECT_EQ(post.tag, 4);
  EXPECT_EQ(post.params, "id=42;post=7;");
  EXPECT_EQ(match(router, "GET", "/users/me").tag, 5);  // a literal beats a parameter
  auto file = match(router, "GET", "/static/css/site.css");
  EXPECT_EQ(file.tag, 7);
  EXPECT_EQ(file.params, "*=css/site.css;");
  auto empty_rest = match(router, "GET", "/static/");
  EXPECT_EQ(empty_rest.tag, 7);
  EXPECT_EQ(empty_rest.params, "*=;");
  EXPECT_EQ(match(router, "GET", "/static").tag, 0);
  EXPECT_EQ(match(router, "GET", "/users/42/posts").tag, 0);
  EXPECT_EQ(match(router, "GET", "/nothing").tag, 0);
  EXPECT_EQ(match(router, "GET", "/nothing").allowed, 0);
}

TEST(Router, FallsBackToALessSpecificRouteThatHasTheMethod) {
  Router router;
  router.post("/items/new", tagged(1));
  router.get("/items/{id}", tagged(2));
  router.get("/*", tagged(3));
  EXPECT_EQ(match(router, "POST", "/items/new").tag, 1);
  auto get = match(router, "GET", "/items/new");
  EXPECT_EQ(get.tag, 2);
  EXPECT_EQ(get.params, "id=new;");
  EXPECT_EQ(match(router, "GET", "/anything/else").tag, 3);
}

TEST(Router, Answers405WithTheAllowedMethodsAndHeadThroughGet) {
  Router router;
  router.get("/thing", tagged(1));
  router.put("/thing", tagged(2));
  router.del("/thing", tagged(3));
  EXPECT_EQ(match(router, "HEAD", "/thing").tag, 1);
  auto post = match(router, "POST", "/thing");
  EXPECT_EQ(post.tag, 0);
  EXPECT_EQ(post.allowed, bits({Method::kGet, Method::kHead, Method::kPut, Method::kDelete}));
  EXPECT_EQ(Router::allow_header(post.allowed), "GET, HEAD, PUT, DELETE");
  router.head("/thing", tagged(4));
  EXPECT_EQ(match(router, "HEAD", "/thing").tag, 4);  // its own HEAD route wins
}

TEST(Router, RefusesMalformedPatternsAndDuplicates) {
  Router router;
  router.get("/a/{id}", tagged(1));
  EXPECT_THROW(router.get("a", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/*/b", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/{}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/{x-y}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/{id}/{id}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/{other}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/b{c}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/a/{id}", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.add(Method::kConnect, "/c", tagged(1)), std::invalid_argument);
  EXPECT_THROW(router.get("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/*", tagged(1)), std::invalid_argument);
  EXPECT_NO_THROW(router.get("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/*", tagged(1)));
}

/// The route number `router` gives `target` for `method` (kNoRoute when nothing answers).
uint32_t route_of(Router& router, const std::string& method, const std::string& target) {
  detail::RequestParser parser(detail::ParserLimits{});
  const std::string text = method + " " + target + " HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string_view input(text);
  EXPECT_EQ(parser.feed(input), detail::RequestParser::Event::kRequest) << text;
  return router.match(parser.request()).route;
}

TEST(Router, NumbersEachPatternOnceForAllItsMethods) {
  Router router;
  router.get("/users/{id}", tagged(1));
  router.put("/users/{id}", tagged(2));
  router.get("/static/*", tagged(3));
  router.get("/", tagged(4));
  router.get("/*", tagged(5));
  ASSERT_EQ(router.routes(), (std::vector<std::string>{"/users/{id}", "/static/*", "/", "/*"}));
  EXPECT_EQ(route_of(router, "GET", "/users/7"), 0u);
  EXPECT_EQ(route_of(router, "PUT", "/users/7"), 0u);
  EXPECT_EQ(route_of(router, "HEAD", "/users/7"), 0u);  // through GET
  EXPECT_EQ(route_of(router, "GET", "/static/a/b.css"), 1u);
  EXPECT_EQ(route_of(router, "GET", "/"), 2u);
  EXPECT_EQ(route_of(router, "GET", "/other"), 3u);
  EXPECT_EQ(route_of(router, "DELETE", "/users/7"), Router::kNoRoute);  // 405
  Router empty;
  EXPECT_EQ(route_of(empty, "GET", "/"), Router::kNoRoute);  // 404
}

}  // namespace
}  // namespace ucp::http
