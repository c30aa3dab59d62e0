// Percent-decoding, dot-segment removal and HTTP dates.

#include "ucp/http/Url.h"

#include <string>

#include <gtest/gtest.h>

#include "ucp/http/HttpDate.h"

namespace ucp::http {
namespace {

std::string decoded(std::string_view text) {
  std::string out;
  return percent_decode(text, out) ? out : "<invalid>";
}

std::string normalized(std::string_view path) {
  std::string out;
  return normalize_path(path, out) ? out : "<escapes>";
}

std::string encoded_path(std::string_view path) {
  std::string out;
  append_encoded_path(out, path);
  return out;
}

std::string encoded_query(std::string_view query) {
  std::string out;
  append_encoded_query(out, query);
  return out;
}

// What the server writes into a Location: nothing a browser could read as another host or
// another part of the URL, and decoding it gives the path back.
TEST(Url, EncodesPathsAndQueriesForHeaders) {
  EXPECT_EQ(encoded_path("/sub/"), "/sub/");
  EXPECT_EQ(encoded_path("/a\\b/"), "/a%5Cb/");
  EXPECT_EQ(encoded_path("/sp ace/%/?#"), "/sp%20ace/%25/%3F%23");
  EXPECT_EQ(encoded_path("/\x01\x7f\xc3\xa9\"<>"), "/%01%7F%C3%A9%22%3C%3E");
  EXPECT_EQ(encoded_path("/-._~!$&'()*+,;=:@"), "/-._~!$&'()*+,;=:@");
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(decoded(encoded_path(all)), all);
  EXPECT_EQ(encoded_query("a=1&b=%2F/?"), "a=1&b=%2F/?");
  EXPECT_EQ(encoded_query("x=\\y&z=%zz&w=%4"), "x=%5Cy&z=%25zz&w=%254");
  EXPECT_EQ(encoded_query("\xff#"), "%FF%23");
}

TEST(Url, DecodesPercentEscapesOnce) {
  EXPECT_EQ(decoded("/a%20b"), "/a b");
  EXPECT_EQ(decoded("%2e%2E/%2f"),
            "../"
            "/");
  EXPECT_EQ(decoded("%252e"), "%2e");
  EXPECT_EQ(decoded("%"), "<invalid>");
  EXPECT_EQ(decoded("%4"), "<invalid>");
  EXPECT_EQ(decoded("%zz"), "<invalid>");
  EXPECT_EQ(decoded("a%00b"), "<invalid>");
}

TEST(Url, RemovesDotSegmentsWithoutClimbingAboveTheRoot) {
  EXPECT_EQ(normalized("/"), "/");
  EXPECT_EQ(normalized("/a/b/c"), "/a/b/c");
  EXPECT_EQ(normalized("/a/./b/../c"), "/a/c");
  EXPECT_EQ(normalized("/a//b/"), "/a/b/");
  EXPECT_EQ(normalized("/a/b/.."), "/a/");
  EXPECT_EQ(normalized("/a/."), "/a/");
  EXPECT_EQ(normalized("/.."), "<escapes>");
  EXPECT_EQ(normalized("/a/../.."), "<escapes>");
  EXPECT_EQ(normalized("/a/../../etc/passwd"), "<escapes>");
  EXPECT_EQ(normalized("a/b"), "<escapes>");
  EXPECT_EQ(normalized("/..a/b.."), "/..a/b..");
  // Paths already normal come back as they are; the others at their edges do not.
  EXPECT_EQ(normalized("/a/"), "/a/");
  EXPECT_EQ(normalized("/.hidden/.x./..y"), "/.hidden/.x./..y");
  EXPECT_EQ(normalized("//"), "/");
  EXPECT_EQ(normalized("/a//"), "/a/");
  EXPECT_EQ(normalized("/./a"), "/a");
  EXPECT_EQ(normalized("/a/b/../"), "/a/");
  EXPECT_EQ(normalized("/a/./"), "/a/");
}

TEST(HttpDate, FormatsAndParsesTheThreeFormats) {
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  std::time_t t = 0;
  ASSERT_TRUE(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", t));
  EXPECT_EQ(t, 784111777);
  ASSERT_TRUE(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", t));
  EXPECT_EQ(t, 784111777);
  ASSERT_TRUE(parse_http_date("Sun Nov  6 08:49:37 1994", t));
  EXPECT_EQ(t, 784111777);
  ASSERT_TRUE(parse_http_date("Thu, 29 Feb 2024 23:59:59 GMT", t));
  EXPECT_EQ(format_http_date(t), "Thu, 29 Feb 2024 23:59:59 GMT");
  EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC", t));
  EXPECT_FALSE(parse_http_date("Sun, 6 Nov 1994 08:49:37 GMT", t));
  EXPECT_FALSE(parse_http_date("yesterday", t));
  EXPECT_FALSE(parse_http_date("", t));
  EXPECT_EQ(cached_http_date().size(), kHttpDateLength);
  EXPECT_TRUE(parse_http_date(cached_http_date(), t));
}

}  // namespace
}  // namespace ucp::http
