// JSON bodies (ucp/http/Json.h, on nlohmann/json) over real loopback connections: reading a
// request's body, answering with a value, errors with their place, the nesting limit.

#include "ucp/http/Json.h"

#include <string>

#include <gtest/gtest.h>

#include "ucp/http/HttpServer.h"

#include "HttpTestServer.h"

namespace ucp::http {
namespace {

using test::ask_once;
using test::HttpTestServer;

std::string post(std::string_view path, std::string_view body,
                 std::string_view type = "application/json") {
  return "POST " + std::string(path) +
         " HTTP/1.1\r\nHost: a\r\nContent-Type: " + std::string(type) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

void json_routes(HttpServer& server) {
  server.router().post("/rooms", [](Request& req, Response& res) -> Task<> {
    if (!is_json(req)) co_return res.text("want JSON\n", 415);
    auto body = read_json(req);
    if (!body) co_return res.text(body.error().message + "\n", 400);
    const std::string name = body->value("name", "");
    co_return json(res, {{"room", name}, {"members", (*body)["members"].size()}}, 201);
  });
  server.router().get("/odd", [](Request&, Response& res) -> Task<> {
    co_return json(res, {{"bytes", std::string("ok \xFF bad")}});
  });
}

TEST(Json, ReadsBodiesAndAnswersWithValues) {
  HttpTestServer s(json_routes);
  auto created = ask_once(s.port(), post("/rooms", R"({"name":"my room","members":["a","b"]})"));
  EXPECT_EQ(created.status, 201);
  EXPECT_EQ(created.header("content-type"), "application/json");
  EXPECT_EQ(created.body, R"({"members":2,"room":"my room"})");
  EXPECT_EQ(Json::parse(created.body)["room"], "my room");
  auto problem = ask_once(s.port(), post("/rooms", "{}", "application/problem+json"));
  EXPECT_EQ(problem.status, 201);
  auto wrong_type = ask_once(s.port(), post("/rooms", "{}", "text/plain"));
  EXPECT_EQ(wrong_type.status, 415);
}

TEST(Json, MalformedOrTooDeepBodiesAreErrorsWithTheirPlace) {
  HttpTestServer s(json_routes);
  auto broken = ask_once(s.port(), post("/rooms", R"({"name": tru})"));
  EXPECT_EQ(broken.status, 400);
  EXPECT_NE(broken.body.find("invalid JSON: parse error at line 1, column 13"), std::string::npos)
      << broken.body;
  auto empty = ask_once(s.port(), post("/rooms", ""));
  EXPECT_EQ(empty.status, 400);
  // Deep nesting is refused before nlohmann/json builds it (a recursive walk of it could
  // overflow the stack); brackets inside strings do not count.
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  auto too_deep = ask_once(s.port(), post("/rooms", deep));
  EXPECT_EQ(too_deep.status, 400);
  EXPECT_EQ(too_deep.body, "JSON nested deeper than 256\n");
  const std::string brackets = R"({"name":")" + std::string(1000, '[') + R"(\"["})";
  EXPECT_EQ(ask_once(s.port(), post("/rooms", brackets)).status, 201);
}

TEST(Json, InvalidUtf8IsReplacedNotThrown) {
  HttpTestServer s(json_routes);
  auto odd = ask_once(s.port(), "GET /odd HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(odd.status, 200);
  EXPECT_EQ(odd.body, "{\"bytes\":\"ok \xEF\xBF\xBD bad\"}");
}

}  // namespace
}  // namespace ucp::http
