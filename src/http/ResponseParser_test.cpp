// ResponseParser: responses framed every way HTTP/1.1 allows, fed whole, split at every byte
// and one byte at a time; interim answers skipped; and every ambiguous framing refused.

#include "ResponseParser.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace ucp::http::detail {
namespace {

using Event = ResponseParser::Event;

struct Parsed {
  bool ok = false;
  std::string reason;  // the error's, when !ok
  int status = 0;
  BodyFraming framing = BodyFraming::kNone;
  bool keep_alive = false;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::pair<std::string, std::string>> trailers;
  size_t left = 0;  // bytes after the response, not consumed
};

/// Feeds `pieces` one after the other (each a separate input, as separate receives would be),
/// then the end of the connection if `eof`. The body is collected from the pieces as they come.
/// Each input is overwritten and freed once it has been fed, as a receive buffer given back
/// would be: the head and the trailers must not point into one.
Parsed parse(const std::vector<std::string>& pieces, bool head_request = false, bool eof = false) {
  SessionLimits limits;
  limits.max_head_bytes = 1024;
  limits.max_headers = 8;
  ResponseParser parser(limits);
  parser.start(head_request);
  Parsed out;
  bool ended = false;
  for (const std::string& piece : pieces) {
    std::string held = piece;
    std::string_view input = held;
    while (!ended) {
      const Event event = parser.feed(input);
      if (event == Event::kNeedMore) break;
      if (event == Event::kError) {
        out.reason = parser.error_reason();
        return out;
      }
      if (event == Event::kHead) {
        const ResponseHead& head = parser.head();
        out.status = head.status;
        out.framing = head.framing;
        out.keep_alive = head.keep_alive;
        for (const Header& h : head.headers) out.headers.emplace_back(h.name, h.value);
        if (head.status == 101) ended = true;
      }
      if (event == Event::kBody) out.body += parser.body_piece();
      if (event == Event::kEnd) ended = true;
    }
    if (ended) out.left += input.size();
    held.assign(held.size(), '#');
  }
  if (!ended && eof) {
    if (parser.finish() != Event::kEnd) {
      out.reason = parser.error_reason();
      return out;
    }
    ended = true;
  }
  if (!ended) {
    out.reason = "incomplete";
    return out;
  }
  for (const Header& h : parser.trailers()) out.trailers.emplace_back(h.name, h.value);
  out.ok = true;
  return out;
}

Parsed parse_whole(std::string_view text, bool head_request = false, bool eof = false) {
  return parse({std::string(text)}, head_request, eof);
}

/// The same response split in two at every offset, and fed one byte at a time.
void expect_same_at_every_split(std::string_view text, const Parsed& whole, bool eof = false) {
  for (size_t cut = 1; cut < text.size(); ++cut) {
    const Parsed split =
        parse({std::string(text.substr(0, cut)), std::string(text.substr(cut))}, false, eof);
    ASSERT_TRUE(split.ok) << "cut at " << cut << ": " << split.reason;
    EXPECT_EQ(split.body, whole.body) << "cut at " << cut;
    EXPECT_EQ(split.headers, whole.headers) << "cut at " << cut;
    EXPECT_EQ(split.trailers, whole.trailers) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  const Parsed single = parse(bytes, false, eof);
  ASSERT_TRUE(single.ok) << single.reason;
  EXPECT_EQ(single.body, whole.body);
  EXPECT_EQ(single.headers, whole.headers);
}

TEST(ResponseParser, ContentLengthBody) {
  constexpr std::string_view kText =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
  const Parsed p = parse_whole(kText);
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.framing, BodyFraming::kLength);
  EXPECT_TRUE(p.keep_alive);
  EXPECT_EQ(p.body, "hello");
  ASSERT_EQ(p.headers.size(), 2u);
  EXPECT_EQ(p.headers[0], std::make_pair(std::string("Content-Type"), std::string("text/plain")));
  expect_same_at_every_split(kText, p);
}

TEST(ResponseParser, ChunkedBodyWithExtensionsAndTrailers) {
  constexpr std::string_view kText =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5 ; a=b\r\nhello\r\n6;q=\"x\\\"y\"\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n";
  const Parsed p = parse_whole(kText);
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.framing, BodyFraming::kChunked);
  EXPECT_EQ(p.body, "hello world");
  ASSERT_EQ(p.trailers.size(), 1u);
  EXPECT_EQ(p.trailers[0], std::make_pair(std::string("X-Sum"), std::string("42")));
  expect_same_at_every_split(kText, p);
}

TEST(ResponseParser, BodyUntilTheConnectionCloses) {
  constexpr std::string_view kText = "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\n\r\nall of it";
  const Parsed p = parse_whole(kText, false, true);
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.framing, BodyFraming::kUntilClose);
  EXPECT_FALSE(p.keep_alive);
  EXPECT_EQ(p.body, "all of it");
  expect_same_at_every_split(kText, p, true);
  // Without the close it is not complete.
  EXPECT_FALSE(parse_whole(kText).ok);
}

TEST(ResponseParser, NoBodyForHeadRequests204And304) {
  const Parsed head =
      parse_whole("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", /*head_request=*/true);
  ASSERT_TRUE(head.ok) << head.reason;
  EXPECT_EQ(head.framing, BodyFraming::kNone);
  EXPECT_TRUE(head.keep_alive);
  const Parsed chunked_head =
      parse_whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true);
  ASSERT_TRUE(chunked_head.ok) << chunked_head.reason;
  for (const char* status : {"204 No Content", "304 Not Modified"}) {
    const Parsed p = parse_whole(std::string("HTTP/1.1 ") + status + "\r\nETag: \"x\"\r\n\r\n");
    ASSERT_TRUE(p.ok) << status << ": " << p.reason;
    EXPECT_EQ(p.framing, BodyFraming::kNone);
    EXPECT_TRUE(p.keep_alive);
  }
}

TEST(ResponseParser, InterimAnswersAreSkipped) {
  constexpr std::string_view kText =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
  const Parsed p = parse_whole(kText);
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.status, 201);
  EXPECT_EQ(p.body, "ok");
  ASSERT_EQ(p.headers.size(), 1u);  // the 103's Link is not the response's
  expect_same_at_every_split(kText, p);
}

TEST(ResponseParser, SwitchingProtocolsEndsHttp) {
  const Parsed p = parse_whole(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
      "\x81\x02hi");
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.status, 101);
  EXPECT_FALSE(p.keep_alive);
  EXPECT_EQ(p.left, 4u);  // the new protocol's bytes, left for the caller
}

TEST(ResponseParser, ConnectionCloseIsNotKeepAlive) {
  const Parsed close =
      parse_whole("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(close.ok);
  EXPECT_FALSE(close.keep_alive);
  const Parsed http10 = parse_whole("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(http10.ok);
  EXPECT_FALSE(http10.keep_alive);
  const Parsed http10_keep =
      parse_whole("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(http10_keep.ok);
  EXPECT_TRUE(http10_keep.keep_alive);
}

TEST(ResponseParser, BytesAfterTheResponseAreLeftAlone) {
  const Parsed p = parse_whole("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n");
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.left, 17u);
}

TEST(ResponseParser, RefusesAmbiguousOrMalformedFraming) {
  const char* vectors[] = {
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc",
      "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
      "chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;\r\nabc\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
      "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A:\r\n folded\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\n: 1\r\nContent-Length: 0\r\n\r\n",
      "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n",
      "ICY 200 OK\r\n\r\n",
  };
  for (const char* text : vectors) {
    const Parsed whole = parse_whole(text);
    EXPECT_FALSE(whole.ok) << "accepted: " << text;
    // Also when the bytes come one at a time (a fold split across receives, say).
    std::vector<std::string> bytes;
    for (const char* c = text; *c != '\0'; ++c) bytes.emplace_back(1, *c);
    EXPECT_FALSE(parse(bytes).ok) << "accepted byte by byte: " << text;
  }
}

TEST(ResponseParser, RefusesHeadsAboveTheLimits) {
  const std::string long_value(2000, 'v');
  EXPECT_FALSE(parse_whole("HTTP/1.1 200 OK\r\nX-Big: " + long_value + "\r\n\r\n").ok);
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_FALSE(parse_whole(many + "Content-Length: 0\r\n\r\n").ok);
  std::string interim;
  for (uint32_t i = 0; i <= ResponseParser::kMaxInterim; ++i)
    interim += "HTTP/1.1 100 Continue\r\n\r\n";
  EXPECT_FALSE(parse_whole(interim + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").ok);
}

TEST(ResponseParser, ClosedBeforeTheEndIsAnError) {
  EXPECT_FALSE(parse_whole("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", false, true).ok);
  EXPECT_FALSE(
      parse_whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", false, true).ok);
  EXPECT_FALSE(parse_whole("HTTP/1.1 200 OK\r\nContent-Le", false, true).ok);
}

TEST(ResponseParser, ParsesOneResponseAfterAnother) {
  SessionLimits limits;
  ResponseParser parser(limits);
  for (int round = 0; round < 3; ++round) {
    parser.start(false);
    std::string text = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" + std::to_string(round);
    std::string_view input = text;
    ASSERT_EQ(parser.feed(input), Event::kHead);
    ASSERT_EQ(parser.feed(input), Event::kBody);
    EXPECT_EQ(parser.body_piece(), std::to_string(round));
    ASSERT_EQ(parser.feed(input), Event::kEnd);
    EXPECT_TRUE(input.empty());
  }
}

}  // namespace
}  // namespace ucp::http::detail
