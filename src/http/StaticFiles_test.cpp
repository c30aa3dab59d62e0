// StaticFiles mounted on a path, send_file, and the conditional-request and range evaluation
// (Preconditions.h) on content of a handler's own, over real loopback connections.

#include "ucp/http/StaticFiles.h"

#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucp/http/HttpDate.h"
#include "ucp/http/HttpServer.h"
#include "ucp/http/Preconditions.h"

#include "HttpTestServer.h"
#include "ScratchDir.h"

namespace ucp::http {
namespace {

using test::ask;
using test::ask_once;
using test::HttpTestServer;

std::string get(std::string_view target, std::string_view extra = {}) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: a\r\n" + std::string(extra) + "\r\n";
}

class StaticFilesTest : public ::testing::Test {
 protected:
  StaticFilesTest() {
    root_.write("index.html", "<h1>home</h1>\n");
    root_.write("css/site.css", "body { color: red }\n");  // 20 bytes
    root_.write("docs/index.html", "docs\n");
    root_.write("big.bin", std::string(100 * 1024, 'b'));  // past the cache's byte limit
    outside_.write("secret.txt", "secret\n");
    EXPECT_EQ(::symlink(outside_.path("secret.txt").c_str(), root_.path("out.txt").c_str()), 0);
    EXPECT_EQ(::symlink("css/site.css", root_.path("in.css").c_str()), 0);
  }
  test::ScratchDir root_{"ucp-static"};
  test::ScratchDir outside_{"ucp-static-outside"};
};

TEST_F(StaticFilesTest, MountedOnAPrefix) {
  HttpTestServer s([&](HttpServer& server) {
    auto files = StaticFiles::open(root_.path());
    ASSERT_TRUE(files) << files.error().message;
    files->mount(server.router(), "/static/");
    server.router().get("/other",
                        [](Request&, Response& res) -> Task<> { co_return res.text("other"); });
  });
  auto css = ask_once(s.port(), get("/static/css/site.css"));
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.body, "body { color: red }\n");
  EXPECT_EQ(css.header("content-type"), "text/css");
  EXPECT_EQ(css.header("accept-ranges"), "bytes");
  EXPECT_EQ(css.header("etag").front(), '"');
  EXPECT_EQ(css.header("last-modified").size(), kHttpDateLength);
  EXPECT_EQ(ask_once(s.port(), get("/static/")).body, "<h1>home</h1>\n");
  EXPECT_EQ(ask_once(s.port(), get("/static/in.css")).body, "body { color: red }\n");
  EXPECT_EQ(ask_once(s.port(), get("/other")).body, "other");
  EXPECT_EQ(ask_once(s.port(), get("/index.html")).status, 404);  // only under the mount
  // The prefix alone and a directory without its slash: 301, encoded, behind the prefix.
  auto bare = ask_once(s.port(), get("/static?x=1"));
  EXPECT_EQ(bare.status, 301);
  EXPECT_EQ(bare.header("location"), "/static/?x=1");
  auto dir = ask_once(s.port(), get("/static//docs"));
  EXPECT_EQ(dir.status, 301);
  EXPECT_EQ(dir.header("location"), "/static/docs/");
  EXPECT_EQ(ask_once(s.port(), get("/static/docs/")).body, "docs\n");
  // Out of the root: by dot segments (encoded too), by a symlink.
  EXPECT_EQ(ask_once(s.port(), get("/static/../static/css/site.css")).status, 403);
  EXPECT_EQ(ask_once(s.port(), get("/static/%2e%2e/x")).status, 403);
  EXPECT_EQ(ask_once(s.port(), get("/static/out.txt")).status, 403);
  EXPECT_EQ(ask_once(s.port(), get("/static/missing")).status, 404);
  EXPECT_EQ(ask_once(s.port(), get("/static/%zz")).status, 400);
  // HEAD: the headers without the body; a large file goes out whole.
  auto head = ask_once(s.port(), "HEAD /static/big.bin HTTP/1.1\r\nHost: a\r\n\r\n", true);
  EXPECT_EQ(head.header("content-length"), std::to_string(100 * 1024));
  EXPECT_EQ(ask_once(s.port(), get("/static/big.bin")).body, std::string(100 * 1024, 'b'));
}

TEST_F(StaticFilesTest, ConditionalRequestsAndRanges) {
  HttpTestServer s([&](HttpServer& server) {
    auto files = StaticFiles::open(root_.path(), {.index = ""});
    ASSERT_TRUE(files);
    files->mount(server.router(), "/");
  });
  auto fd = test::connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  const auto first = ask(fd->get(), get("/css/site.css"), pending);
  const std::string etag = first.header("etag");
  const std::string modified = first.header("last-modified");
  const auto status = [&](std::string_view extra) {
    return ask(fd->get(), get("/css/site.css", extra), pending).status;
  };
  EXPECT_EQ(status("If-None-Match: " + etag + "\r\n"), 304);
  EXPECT_EQ(status("If-None-Match: \"x\", W/" + etag + "\r\n"), 304);  // weak comparison
  EXPECT_EQ(status("If-None-Match: *\r\n"), 304);
  EXPECT_EQ(status("If-None-Match: \"x\"\r\n"), 200);
  EXPECT_EQ(status("If-Modified-Since: " + modified + "\r\n"), 304);
  EXPECT_EQ(status("If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n"), 200);
  EXPECT_EQ(status("If-Modified-Since: not a date\r\n"), 200);
  // If-None-Match wins over If-Modified-Since.
  EXPECT_EQ(status("If-None-Match: \"x\"\r\nIf-Modified-Since: " + modified + "\r\n"), 200);
  // If-Match: strong comparison, 412 when it fails; If-Unmodified-Since likewise.
  EXPECT_EQ(status("If-Match: " + etag + "\r\n"), 200);
  EXPECT_EQ(status("If-Match: W/" + etag + "\r\n"), 412);
  EXPECT_EQ(status("If-Match: \"x\"\r\n"), 412);
  EXPECT_EQ(status("If-Match: *\r\n"), 200);
  EXPECT_EQ(status("If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n"), 412);
  EXPECT_EQ(status("If-Unmodified-Since: " + modified + "\r\n"), 200);
  EXPECT_EQ(
      status("If-Match: " + etag + "\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n"),
      200);  // If-Match present: If-Unmodified-Since is not looked at
  // Ranges.
  auto part = ask(fd->get(), get("/css/site.css", "Range: bytes=5-9\r\n"), pending);
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.body, "{ col");
  EXPECT_EQ(part.header("content-range"), "bytes 5-9/20");
  EXPECT_EQ(ask(fd->get(), get("/css/site.css", "Range: bytes=-3\r\n"), pending).body, " }\n");
  EXPECT_EQ(ask(fd->get(), get("/css/site.css", "Range: bytes=18-\r\n"), pending).body, "}\n");
  EXPECT_EQ(ask(fd->get(), get("/css/site.css", "Range: bytes=15-99\r\n"), pending).body, "ed }\n");
  auto unsatisfiable = ask(fd->get(), get("/css/site.css", "Range: bytes=20-\r\n"), pending);
  EXPECT_EQ(unsatisfiable.status, 416);
  EXPECT_EQ(unsatisfiable.header("content-range"), "bytes */20");
  EXPECT_EQ(status("Range: bytes=0-1,5-6\r\n"), 200);  // several: the whole file
  EXPECT_EQ(status("Range: items=0-1\r\n"), 200);      // another unit
  EXPECT_EQ(status("Range: bytes=0-1\r\nIf-Range: " + etag + "\r\n"), 206);
  EXPECT_EQ(status("Range: bytes=0-1\r\nIf-Range: W/" + etag + "\r\n"), 200);  // weak: never
  EXPECT_EQ(status("Range: bytes=0-1\r\nIf-Range: \"stale\"\r\n"), 200);
  EXPECT_EQ(status("Range: bytes=0-1\r\nIf-Range: " + modified + "\r\n"), 206);
  EXPECT_EQ(status("Range: bytes=0-1\r\nIf-Range: Thu, 01 Jan 1970 00:00:01 GMT\r\n"), 200);
  // A large file's range is sent from the file.
  auto big = ask(fd->get(), get("/big.bin", "Range: bytes=102000-\r\n"), pending);
  EXPECT_EQ(big.status, 206);
  EXPECT_EQ(big.body, std::string(400, 'b'));
  // No index configured: a directory is 404.
  EXPECT_EQ(ask(fd->get(), get("/docs/"), pending).status, 404);
}

TEST_F(StaticFilesTest, SendFileAnswersWithOneFile) {
  const std::string css = root_.path("css/site.css");
  HttpTestServer s([&](HttpServer& server) {
    server.router().get("/style", [css](Request& req, Response& res) -> Task<> {
      co_return send_file(req, res, css);
    });
    server.router().get("/dir", [this](Request& req, Response& res) -> Task<> {
      co_return send_file(req, res, root_.path("docs"));
    });
    server.router().get("/none", [this](Request& req, Response& res) -> Task<> {
      co_return send_file(req, res, root_.path("missing"));
    });
  });
  auto style = ask_once(s.port(), get("/style"));
  EXPECT_EQ(style.status, 200);
  EXPECT_EQ(style.body, "body { color: red }\n");
  EXPECT_EQ(style.header("content-type"), "text/css");
  EXPECT_EQ(
      ask_once(s.port(), get("/style", "If-None-Match: " + style.header("etag") + "\r\n")).status,
      304);
  EXPECT_EQ(ask_once(s.port(), get("/style", "Range: bytes=0-3\r\n")).body, "body");
  EXPECT_EQ(ask_once(s.port(), get("/dir")).status, 404);
  EXPECT_EQ(ask_once(s.port(), get("/none")).status, 404);
}

TEST(Preconditions, OnContentOfAHandlersOwn) {
  // A document with a version number and no file: the same rules through answer_conditional.
  const std::string body = "0123456789";
  HttpTestServer s([&](HttpServer& server) {
    server.router().get("/doc", [&](Request& req, Response& res) -> Task<> {
      const Validators validators{.etag = "\"v7\"", .last_modified = 1'700'000'000};
      const auto part = answer_conditional(req, res, validators, body.size());
      if (!part) co_return;
      res.set_content_type("text/plain");
      res.body_buffer() = body.substr(part->offset, part->length);
    });
    server.router().put("/doc", [&](Request& req, Response& res) -> Task<> {
      const int status = evaluate_preconditions(req, {.etag = "\"v7\""});
      if (status != 0) co_return res.reply(status);
      co_return res.reply(204);
    });
  });
  auto whole = ask_once(s.port(), get("/doc"));
  EXPECT_EQ(whole.body, body);
  EXPECT_EQ(whole.header("etag"), "\"v7\"");
  EXPECT_EQ(whole.header("last-modified"), format_http_date(1'700'000'000));
  EXPECT_EQ(ask_once(s.port(), get("/doc", "If-None-Match: \"v7\"\r\n")).status, 304);
  EXPECT_EQ(ask_once(s.port(), get("/doc", "Range: bytes=2-4\r\n")).body, "234");
  EXPECT_EQ(ask_once(s.port(), get("/doc", "Range: bytes=10-\r\n")).status, 416);
  // Lost-update prevention for a write: If-Match must name the current version; a PUT whose
  // If-None-Match matches is 412, not 304.
  const std::string put = "PUT /doc HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n";
  EXPECT_EQ(ask_once(s.port(), put + "If-Match: \"v7\"\r\n\r\n").status, 204);
  EXPECT_EQ(ask_once(s.port(), put + "If-Match: \"v6\"\r\n\r\n").status, 412);
  EXPECT_EQ(ask_once(s.port(), put + "If-None-Match: *\r\n\r\n").status, 412);
  EXPECT_EQ(ask_once(s.port(), put + "\r\n").status, 204);
}

TEST(Preconditions, EntityTagLists) {
  EXPECT_TRUE(entity_tag_listed("\"a\", \"b\"", "\"b\"", true));
  EXPECT_TRUE(entity_tag_listed("*", "\"b\"", true));
  EXPECT_FALSE(entity_tag_listed("W/\"b\"", "\"b\"", true));
  EXPECT_TRUE(entity_tag_listed("W/\"b\"", "\"b\"", false));
  EXPECT_TRUE(entity_tag_listed("\"b\"", "W/\"b\"", false));
  EXPECT_FALSE(entity_tag_listed("\"a\"", "", false));
  EXPECT_FALSE(entity_tag_listed("", "\"a\"", false));
  EXPECT_EQ(file_entity_tag(0x6560c2a1, 500), "\"6560c2a1-1f4\"");
}

}  // namespace
}  // namespace ucp::http
