// Response heads as bytes: status line, the server's own fields, framing, keep-alive; and
// the Response object's header rules.

#include "ResponseEncoder.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "ucp/http/Response.h"

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
  EXPECT_THROW(response.add_header("X-Bad", "a\r\nSet-Cookie: x"), std::invalid_argument);
  EXPECT_THROW(response.add_header("X Bad", "a"), std::invalid_argument);
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

}  // namespace
}  // namespace ucp::http::detail
