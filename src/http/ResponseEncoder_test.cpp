// Response heads as bytes: status line, the server's own fields, framing, keep-alive; the
// Response object's header rules and one-call answers; the reason phrases.

#include "ResponseEncoder.h"

#include <string>

#include <gtest/gtest.h>

#include "ucp/http/Response.h"
#include "ucp/http/Status.h"

namespace ucp::http::detail {
namespace {

std::string encode(const HeadFields& head) {
  OutBuffer out;
  encode_head(head, out);
  return std::string(out.view());
}

TEST(ResponseEncoder, WritesStatusLineServerDateFieldsAndLength) {
  const Header fields[] = {{"Content-Type", "text/plain"}, {"X-A", "1"}};
  EXPECT_EQ(encode({.status = 200,
                    .headers = fields,
                    .framing = Framing::kLength,
                    .content_length = 13,
                    .server_name = "ucp",
                    .date = "Sun, 06 Nov 1994 08:49:37 GMT"}),
            "HTTP/1.1 200 OK\r\nServer: ucp\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            "Content-Type: text/plain\r\nX-A: 1\r\nContent-Length: 13\r\n\r\n");
}

TEST(ResponseEncoder, SaysChunkedCloseAndHttp10KeepAlive) {
  EXPECT_EQ(encode({.status = 404, .framing = Framing::kChunked, .keep_alive = false, .date = "D"}),
            "HTTP/1.1 404 Not Found\r\nDate: D\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n");
  EXPECT_EQ(encode({.status = 304, .framing = Framing::kNone, .version_minor = 0, .date = "D"}),
            "HTTP/1.1 304 Not Modified\r\nDate: D\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(encode({.status = 200,
                    .custom_date = true,
                    .framing = Framing::kUntilClose,
                    .keep_alive = false}),
            "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(encode({.status = 7, .framing = Framing::kLength, .date = "D"}),
            "HTTP/1.1 500 Internal Server Error\r\nDate: D\r\nContent-Length: 0\r\n\r\n");
}

TEST(ResponseEncoder, SpillsPastTheInlineBuffer) {
  OutBuffer out;
  out.append(std::string(OutBuffer::kInlineBytes - 2, 'a'));
  EXPECT_EQ(out.inline_room(), 2u);
  out.append("bcd");
  out.append_hex(255);
  out.append_decimal(42);
  EXPECT_EQ(out.size(), OutBuffer::kInlineBytes - 2 + 3 + 2 + 2);
  EXPECT_EQ(out.view().substr(OutBuffer::kInlineBytes - 3), "abcdff42");
  out.clear();
  EXPECT_EQ(out.inline_room(), OutBuffer::kInlineBytes);
}

TEST(Response, KeepsTheServersFramingAndRefusesSplitting) {
  Response response;
  response.add_header("Content-Type", "text/html");
  response.add_header("Content-Length", "99");       // the server's: ignored
  response.add_header("Transfer-Encoding", "gzip");  // likewise
  response.add_header("Connection", "close");
  EXPECT_EQ(response.headers().size(), 1u);
  EXPECT_TRUE(response.close_requested());
  EXPECT_EQ(response.header("content-type"), "text/html");
  EXPECT_FALSE(response.add_header("X-Bad", "a\r\nSet-Cookie: x"));
  EXPECT_FALSE(response.add_header("X-Nul", std::string_view("a\0b", 3)));
  EXPECT_FALSE(response.add_header("X Bad", "a"));
  EXPECT_FALSE(response.add_header("", "a"));
  EXPECT_FALSE(response.set_header("Content-Type", "text/html\r\nX: y"));
  EXPECT_EQ(response.headers().size(), 1u);  // nothing of the refused ones
  EXPECT_EQ(response.header("content-type"), "text/html");
  // Values beyond the inline arena stay valid.
  const std::string big(2000, 'v');
  response.add_header("X-Big", big);
  response.add_header("X-Small", "s");
  EXPECT_EQ(response.header("x-big"), big);
  EXPECT_EQ(response.header("x-small"), "s");
  response.reset();
  EXPECT_TRUE(response.headers().empty());
  EXPECT_EQ(response.status(), 200);
  EXPECT_FALSE(response.close_requested());
}

TEST(Response, HoldsOneKindOfBody) {
  Response response;
  response.set_body("borrowed");
  EXPECT_EQ(response.body_kind(), Response::BodyKind::kBorrowed);
  EXPECT_EQ(response.body(), "borrowed");
  response.body_buffer() = "owned";
  EXPECT_EQ(response.body_kind(), Response::BodyKind::kOwned);
  EXPECT_EQ(response.body(), "owned");
}

TEST(Response, RefusesHeadersPastItsLimit) {
  Response response;
  for (size_t i = 0; i < Response::kMaxHeaders; ++i) {
    EXPECT_TRUE(response.add_header("X-N", std::to_string(i)));
  }
  EXPECT_FALSE(response.add_header("X-One-More", "x"));
  EXPECT_EQ(response.headers().size(), Response::kMaxHeaders);
  // Replacing one is still possible: it takes no new field.
  EXPECT_TRUE(response.set_header("x-n", "only"));
  EXPECT_EQ(response.headers().size(), 1u);
  EXPECT_EQ(response.header("X-N"), "only");
}

TEST(Response, SetHeaderReplacesAndRemoveHeaderRemoves) {
  Response response;
  response.add_header("Vary", "Origin");
  response.add_header("X-A", "1");
  response.add_header("vary", "Accept");
  EXPECT_TRUE(response.set_header("VARY", "Accept-Encoding"));
  ASSERT_EQ(response.headers().size(), 2u);
  EXPECT_EQ(response.headers()[0].name, "Vary");  // in place: order kept
  EXPECT_EQ(response.headers()[0].value, "Accept-Encoding");
  EXPECT_EQ(response.remove_header("x-a"), 1u);
  EXPECT_EQ(response.remove_header("x-a"), 0u);
  EXPECT_EQ(response.headers().size(), 1u);
  EXPECT_TRUE(response.set_content_type("text/plain"));
  EXPECT_TRUE(response.set_content_type("application/json"));
  EXPECT_EQ(response.header("content-type"), "application/json");
  EXPECT_EQ(response.headers().size(), 2u);
}

TEST(Response, OneCallAnswers) {
  Response response;
  response.text("pong\n");
  EXPECT_EQ(response.status(), 200);
  EXPECT_EQ(response.body(), "pong\n");
  EXPECT_EQ(response.header("content-type"), "text/plain; charset=utf-8");
  response.html("<p>hi</p>", 201);
  EXPECT_EQ(response.status(), 201);
  EXPECT_EQ(response.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(response.headers().size(), 1u);  // replaced, not added
  response.reset();
  response.reply(404);
  EXPECT_EQ(response.status(), 404);
  EXPECT_EQ(response.body(), "Not Found\n");
  response.reply(304);
  EXPECT_EQ(response.body_kind(), Response::BodyKind::kNone);
  response.reset();
  response.redirect("/login?next=%2F", 303);
  EXPECT_EQ(response.status(), 303);
  EXPECT_EQ(response.header("location"), "/login?next=%2F");
  EXPECT_EQ(response.body(), "See Other\n");
  response.reset();
  response.redirect("/x", 200);  // not a redirect status
  EXPECT_EQ(response.status(), 302);
  response.reset();
  response.redirect("/x\r\nSet-Cookie: a=b");
  EXPECT_EQ(response.status(), 500);
  EXPECT_EQ(response.header("location"), "");
}

TEST(Status, EveryRegisteredCodeHasItsPhrase) {
  EXPECT_EQ(reason_phrase(426), "Upgrade Required");
  EXPECT_EQ(reason_phrase(451), "Unavailable For Legal Reasons");
  EXPECT_EQ(reason_phrase(103), "Early Hints");
  EXPECT_EQ(reason_phrase(511), "Network Authentication Required");
  EXPECT_EQ(reason_phrase(200), "OK");
  EXPECT_EQ(reason_phrase(299), "");  // not registered: no phrase
  EXPECT_EQ(reason_phrase(999), "");
  EXPECT_EQ(reason_phrase(-1), "");
  EXPECT_EQ(reason_line(404), "Not Found\n");
  // Every code 100..599 has either its phrase or none, never a placeholder.
  for (int status = 100; status < 600; ++status) {
    const std::string_view phrase = reason_phrase(status);
    EXPECT_EQ(phrase.find('\n'), std::string_view::npos) << status;
    EXPECT_NE(phrase, "Unknown") << status;
  }
  OutBuffer out;
  encode_head({.status = 426, .framing = Framing::kLength, .date = "d"}, out);
  EXPECT_EQ(out.view().substr(0, out.view().find("\r\n")), "HTTP/1.1 426 Upgrade Required");
  out.clear();
  encode_head({.status = 299, .framing = Framing::kLength, .date = "d"}, out);
  EXPECT_EQ(out.view().substr(0, out.view().find("\r\n")), "HTTP/1.1 299 ");
}

}  // namespace
}  // namespace ucp::http::detail
