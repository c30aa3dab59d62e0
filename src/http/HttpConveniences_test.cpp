// The HTTP conveniences over real loopback connections: query strings and decoded path
// parameters, one-call answers and reason phrases, request ids, the access log's formats.

#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/http/AccessLog.h"
#include "ucp/http/HttpServer.h"
#include "ucp/http/Query.h"
#include "ucp/http/RequestId.h"

#include "HttpTestServer.h"

namespace ucp::http {
namespace {

using test::ask;
using test::ask_once;
using test::HttpTestServer;

/// Lines an access log sink received (from the worker thread).
class Lines {
 public:
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(lines_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(HttpConveniences, QueryAndDecodedPathParameters) {
  HttpTestServer s([](HttpServer& server) {
    server.router().get("/chat/{room}", [](Request& req, Response& res) -> Task<> {
      const auto room = req.decoded_param("room");
      if (!room) co_return res.text("bad room\n", 400);
      const Query query(req.query());
      std::string tags;
      for (const std::string_view tag : query.all("tag")) tags += "[" + std::string(tag) + "]";
      co_return res.text(*room + "|" + std::string(req.param("room")) + "|" +
                         std::string(query.get("user", "nobody")) + "|" + tags + "|" +
                         std::to_string(query.get_int("page").value_or(1)));
    });
    server.router().post("/form", [](Request& req, Response& res) -> Task<> {
      const Query form(req.body());  // application/x-www-form-urlencoded
      co_return res.text(std::string(form.get("name")) + "/" + std::string(form.get("note")));
    });
  });
  auto reply = ask_once(s.port(),
                        "GET /chat/my%20room?user=al+ice&tag=a%26b&tag=c&page=3 HTTP/1.1\r\n"
                        "Host: a\r\n\r\n");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "my room|my%20room|al ice|[a&b][c]|3");
  // '+' in a path is a '+'; a query without the names gives the fallbacks.
  EXPECT_EQ(ask_once(s.port(), "GET /chat/a+b%2Fc HTTP/1.1\r\nHost: a\r\n\r\n").body,
            "a+b/c|a+b%2Fc|nobody||1");
  // A malformed escape in a parameter: the handler hears of it.
  auto bad = ask_once(s.port(), "GET /chat/%zz HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(ask_once(s.port(), "GET /chat/x%00y HTTP/1.1\r\nHost: a\r\n\r\n").status, 400);
  const std::string form = "name=Jo+Smith&note=50%25+off";
  auto posted = ask_once(s.port(),
                         "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: "
                         "application/x-www-form-urlencoded\r\nContent-Length: " +
                             std::to_string(form.size()) + "\r\n\r\n" + form);
  EXPECT_EQ(posted.body, "Jo Smith/50% off");
}

TEST(HttpConveniences, OneCallAnswersAndReasonPhrases) {
  HttpTestServer s([](HttpServer& server) {
    auto& r = server.router();
    r.get("/text", [](Request&, Response& res) -> Task<> { co_return res.text("pong\n"); });
    r.get("/html",
          [](Request&, Response& res) -> Task<> { co_return res.html("<h1>hi</h1>", 201); });
    r.get("/go",
          [](Request&, Response& res) -> Task<> { co_return res.redirect("/there?x=1", 307); });
    r.get("/reply/{code}", [](Request& req, Response& res) -> Task<> {
      co_return res.reply(std::stoi(std::string(req.param("code"))));
    });
    r.get("/split", [](Request&, Response& res) -> Task<> {
      co_return res.redirect("/x\r\nSet-Cookie: stolen=1");
    });
  });
  auto fd = test::connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  auto text = ask(fd->get(), "GET /text HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(text.status, 200);
  EXPECT_EQ(text.body, "pong\n");
  EXPECT_EQ(text.header("content-type"), "text/plain; charset=utf-8");
  auto head = ask(fd->get(), "HEAD /text HTTP/1.1\r\nHost: a\r\n\r\n", pending, true);
  EXPECT_EQ(head.header("content-length"), "5");
  auto html = ask(fd->get(), "GET /html HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(html.status, 201);
  EXPECT_EQ(html.header("content-type"), "text/html; charset=utf-8");
  auto go = ask(fd->get(), "GET /go HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(go.status, 307);
  EXPECT_EQ(go.header("location"), "/there?x=1");
  EXPECT_EQ(go.head.substr(0, go.head.find("\r\n")), "HTTP/1.1 307 Temporary Redirect");
  // Every registered code with its phrase (426 was "Unknown"), and the phrase as the body.
  for (const auto& [code, line] :
       std::vector<std::pair<int, std::string>>{{426, "HTTP/1.1 426 Upgrade Required"},
                                                {418, "HTTP/1.1 418 "},
                                                {451, "HTTP/1.1 451 Unavailable For Legal Reasons"},
                                                {429, "HTTP/1.1 429 Too Many Requests"}}) {
    auto reply = ask(
        fd->get(), "GET /reply/" + std::to_string(code) + " HTTP/1.1\r\nHost: a\r\n\r\n", pending);
    EXPECT_EQ(reply.head.substr(0, reply.head.find("\r\n")), line);
    if (code != 418) {
      EXPECT_EQ(reply.body, line.substr(13) + "\n");
    }
  }
  auto no_content = ask(fd->get(), "GET /reply/204 HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(no_content.status, 204);
  // A Location with CR/LF is never sent: 500 instead of a split response.
  auto split = ask(fd->get(), "GET /split HTTP/1.1\r\nHost: a\r\n\r\n", pending);
  EXPECT_EQ(split.status, 500);
  EXPECT_FALSE(split.has_header("set-cookie"));
  EXPECT_FALSE(split.has_header("location"));
  EXPECT_TRUE(pending.empty());
}

TEST(HttpConveniences, RequestIdsAreTakenOrGeneratedEchoedAndLogged) {
  Lines lines;
  HttpTestServer s([&](HttpServer& server) {
    auto format = AccessLogFormat::parse("{request_id} {status}");
    ASSERT_TRUE(format) << format.error().message;
    server.use(access_log({.format = *format, .sink = lines.sink()}));
    server.use(request_id());
    server.router().get("/id", [](Request& req, Response& res) -> Task<> {
      co_return res.text(std::string(req.id()));
    });
  });
  const std::regex generated("[0-9a-f]{32}");
  auto fresh = ask_once(s.port(), "GET /id HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_TRUE(std::regex_match(fresh.body, generated)) << fresh.body;
  EXPECT_EQ(fresh.header("x-request-id"), fresh.body);
  auto second = ask_once(s.port(), "GET /id HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_NE(second.body, fresh.body);
  const std::string uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
  auto taken =
      ask_once(s.port(), "GET /id HTTP/1.1\r\nHost: a\r\nX-Request-Id: " + uuid + "\r\n\r\n");
  EXPECT_EQ(taken.body, uuid);
  EXPECT_EQ(taken.header("x-request-id"), uuid);
  // Not plausible (a space, a quote, too long): replaced, never logged or echoed.
  for (const std::string& bad : {std::string("a b"), std::string("x\"y"), std::string(65, 'a')}) {
    auto replaced =
        ask_once(s.port(), "GET /id HTTP/1.1\r\nHost: a\r\nX-Request-Id: " + bad + "\r\n\r\n");
    EXPECT_TRUE(std::regex_match(replaced.body, generated)) << bad;
  }
  // The 404 of an unknown path has one too, and the log saw every id.
  auto missing = ask_once(s.port(), "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("x-request-id").size(), 32u);
  const auto logged = lines.take();
  ASSERT_EQ(logged.size(), 7u);
  EXPECT_EQ(logged[0], fresh.body + " 200");
  EXPECT_EQ(logged[2], uuid + " 200");
  EXPECT_EQ(logged[6], missing.header("x-request-id") + " 404");
}

TEST(HttpConveniences, RequestIdsCanIgnoreTheClients) {
  HttpTestServer s([&](HttpServer& server) {
    server.use(request_id({.header = "X-Trace", .trust_incoming = false, .echo = false}));
    server.router().get("/id", [](Request& req, Response& res) -> Task<> {
      co_return res.text(std::string(req.id()));
    });
  });
  auto reply = ask_once(s.port(), "GET /id HTTP/1.1\r\nHost: a\r\nX-Trace: mine\r\n\r\n");
  EXPECT_EQ(reply.body.size(), 32u);
  EXPECT_FALSE(reply.has_header("x-trace"));
}

TEST(HttpConveniences, AccessLogFormatsEveryField) {
  Lines lines;
  HttpTestServer s([&](HttpServer& server) {
    auto format = AccessLogFormat::parse(
        "{peer_ip} {method} {target} {path} {query} {protocol} {host} {status} {bytes} "
        "\"{user_agent}\" \"{referer}\" {header:X-Custom} {{literal}} {duration_us} "
        "{duration_ms} {time} {time_local} {peer}");
    ASSERT_TRUE(format) << format.error().message;
    server.use(access_log({.format = *format, .sink = lines.sink()}));
    server.router().get("/a", [](Request&, Response& res) -> Task<> {
      co_return res.text(std::string(1000, 'x'));
    });
    server.router().get("/stream", [](Request&, Response& res) -> Task<> {
      (void)co_await res.write("12345");
      (void)co_await res.write("678");
    });
    server.router().get("/throw", [](Request&, Response&) -> Task<> {
      throw std::runtime_error("bug");
      co_return;
    });
  });
  ask_once(s.port(),
           "GET /a?x=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: curl/8 \"q\"\r\n"
           "Referer: http://r/\r\nX-Custom: \xC3\xA9\r\n\r\n");
  ask_once(s.port(), "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n", true);
  ask_once(s.port(), "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
  ask_once(s.port(), "GET /throw HTTP/1.0\r\n\r\n");
  const auto logged = lines.take();
  ASSERT_EQ(logged.size(), 4u);
  const std::regex full(
      "127\\.0\\.0\\.1 GET /a\\?x=1 /a x=1 HTTP/1\\.1 example\\.test 200 1000 "
      "\"curl/8 \\\\x22q\\\\x22\" \"http://r/\" \\\\xC3\\\\xA9 \\{literal\\} [0-9]+ "
      "[0-9]+\\.[0-9]{3} [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z "
      "\\[[0-9]{2}/[A-Z][a-z]{2}/[0-9]{4}:[0-9:]{8} \\+0000\\] 127\\.0\\.0\\.1:[0-9]+");
  EXPECT_TRUE(std::regex_match(logged[0], full)) << logged[0];
  EXPECT_NE(logged[1].find("HEAD /a /a - HTTP/1.1 h 200 0 \"-\" \"-\" -"), std::string::npos)
      << logged[1];
  EXPECT_NE(logged[2].find(" 200 8 "), std::string::npos) << logged[2];  // a stream's bytes
  EXPECT_NE(logged[3].find("GET /throw /throw - HTTP/1.0 - 500 0"), std::string::npos) << logged[3];
}

TEST(HttpConveniences, AccessLogFormatErrorsNameTheProblem) {
  auto unknown = AccessLogFormat::parse("{peer} {stauts}");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown field {stauts}"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("status"), std::string::npos);  // the list
  auto open = AccessLogFormat::parse("{peer");
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("not closed"), std::string::npos);
  ASSERT_FALSE(AccessLogFormat::parse("a } b"));
  EXPECT_TRUE(AccessLogFormat::parse(AccessLogFormat::kCombined));
  EXPECT_TRUE(AccessLogFormat::parse(""));
}

}  // namespace
}  // namespace ucp::http
