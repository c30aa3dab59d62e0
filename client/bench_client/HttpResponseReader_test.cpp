#include "HttpResponseReader.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace bench {
namespace {

const std::string kStream =
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n"
    "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
    "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n"
    "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
constexpr uint64_t kResponses = 7;

TEST(HttpResponseReader, FramesEveryResponseWhateverTheSplit) {
  // In one piece, byte by byte, and in random pieces.
  for (size_t piece : {kStream.size(), size_t{1}, size_t{0}}) {
    std::mt19937 random(static_cast<unsigned>(piece) + 1);
    HttpResponseReader reader;
    uint64_t responses = 0;
    uint64_t unsuccessful = 0;
    size_t at = 0;
    while (at < kStream.size()) {
      const size_t n = piece != 0 ? piece : 1 + random() % 23;
      const auto progress = reader.feed({kStream.data() + at, std::min(n, kStream.size() - at)});
      ASSERT_EQ(progress.error, nullptr) << progress.error << " at " << at;
      responses += progress.responses;
      unsuccessful += progress.unsuccessful;
      at += n;
    }
    EXPECT_EQ(responses, kResponses) << "piece " << piece;
    EXPECT_EQ(unsuccessful, 1u);
    EXPECT_TRUE(reader.idle());
  }
}

TEST(HttpResponseReader, ReportsWhatItCannotFrame) {
  auto error_of = [](const std::string& text) {
    HttpResponseReader reader;
    const auto progress = reader.feed(text);
    return std::string(progress.error ? progress.error : "");
  };
  EXPECT_NE(error_of("SSH-2.0-OpenSSH\r\n\r\n"), "");
  EXPECT_NE(error_of("HTTP/1.1 2x0 OK\r\n\r\n"), "");
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"), "");
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\n\r\n").find("neither Content-Length"), std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), "");
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz"), "");
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\n" + std::string(70'000, 'a')), "");
}

TEST(HttpResponseReader, IsNotIdleInsideAResponse) {
  HttpResponseReader reader;
  EXPECT_TRUE(reader.idle());
  EXPECT_EQ(reader.feed(std::string_view("HTTP/1.1 200 OK\r\nContent-Le")).responses, 0u);
  EXPECT_FALSE(reader.idle());
  EXPECT_EQ(reader.feed(std::string_view("ngth: 3\r\n\r\nab")).responses, 0u);
  EXPECT_FALSE(reader.idle());
  EXPECT_EQ(reader.feed(std::string_view("c")).responses, 1u);
  EXPECT_TRUE(reader.idle());
}

}  // namespace
}  // namespace bench
