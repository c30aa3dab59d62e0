#include "ucp/http/HttpRequestParser.h"

#include <string>

#include <gtest/gtest.h>

namespace ucp::http {
namespace {

ParseStatus parse(std::string_view text, Request& request) {
  return parse_request(text, 8192, 1 << 20, request);
}
ParseStatus parse(std::string_view text) {
  Request request;
  return parse(text, request);
}

TEST(HttpRequestParser, FramesASimpleKeepAliveRequest) {
  Request request;
  std::string text = "GET /index HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(parse(text, request), ParseStatus::kComplete);
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.target, "/index");
  EXPECT_TRUE(request.keep_alive);
  EXPECT_EQ(request.total_bytes, text.size());
}

TEST(HttpRequestParser, HonoursConnectionCloseAndHttp10) {
  Request request;
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", request), ParseStatus::kComplete);
  EXPECT_FALSE(request.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", request), ParseStatus::kComplete);
  EXPECT_FALSE(request.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", request),
            ParseStatus::kComplete);
  EXPECT_TRUE(request.keep_alive);
}

TEST(HttpRequestParser, WaitsForTheWholeBody) {
  Request request;
  std::string text = "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel";
  EXPECT_EQ(parse(text, request), ParseStatus::kIncomplete);
  text += "lo";
  ASSERT_EQ(parse(text, request), ParseStatus::kComplete);
  EXPECT_EQ(request.total_bytes, text.size());
}

TEST(HttpRequestParser, PipelinedRequestsSplitAtEveryOffsetFrameTheSame) {
  std::string one = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string two = "POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  std::string stream = one + two;
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    Request request;
    auto status = parse(std::string_view(stream).substr(0, cut), request);
    if (cut < one.size()) {
      EXPECT_EQ(status, ParseStatus::kIncomplete) << cut;
    } else {
      ASSERT_EQ(status, ParseStatus::kComplete) << cut;
      EXPECT_EQ(request.total_bytes, one.size());
    }
  }
  Request second;
  ASSERT_EQ(parse(std::string_view(stream).substr(one.size()), second), ParseStatus::kComplete);
  EXPECT_EQ(second.method, "POST");
}

TEST(HttpRequestParser, RejectsMalformedAndAmbiguousFraming) {
  EXPECT_EQ(parse("GARBAGE\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("GET / HTTP/1.32\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("G(T / HTTP/1.1\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\n folded\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(parse("GET / HTTP/1.1\nHost: x\n\n"), ParseStatus::kBadRequest);  // bare LF
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\n"), ParseStatus::kBadRequest);
  for (const char* length :
       {"-1", "+5", "0x10", "1_0", "abc", "", "42, 42", "99999999999999999999999"}) {
    EXPECT_EQ(parse(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n"),
              ParseStatus::kBadRequest)
        << length;
  }
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ParseStatus::kNotImplemented);
}

TEST(HttpRequestParser, EnforcesHeadAndBodyLimits) {
  Request request;
  std::string big(10000, 'a');
  EXPECT_EQ(parse_request("GET / HTTP/1.1\r\nCookie: " + big, 8192, 100, request),
            ParseStatus::kHeaderTooLarge);
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 8192, 100, request),
            ParseStatus::kBodyTooLarge);
}

}  // namespace
}  // namespace ucp::http
