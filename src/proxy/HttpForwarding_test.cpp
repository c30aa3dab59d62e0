// The heads the HTTP mode writes (HttpForwarding.h), byte for byte: fields of every length a
// piece is copied in (the short ones inline, HeadWriter), names and values alike, and the
// framing and Connection lines the gateway adds.

#include "HttpForwarding.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ucp::proxy::detail {
namespace {

TEST(ClientHead, EveryPieceArrivesWholeWhateverItsLength) {
  // Names and values of 1 to 70 bytes (across every inline size class and past it), each a
  // different byte at each position so that a misplaced or overlapping copy shows.
  std::vector<std::string> texts;
  for (size_t n = 1; n <= 70; ++n) {
    std::string text;
    for (size_t i = 0; i < n; ++i) text.push_back(static_cast<char>('a' + (n + i) % 26));
    texts.push_back("X" + text);  // (no field name of the gateway's own)
  }
  http::ResponseHead response;
  response.status = 200;
  response.reason = "Fine Thank You";
  response.framing = http::BodyFraming::kLength;
  response.content_length = 1234567;
  std::string expected = "HTTP/1.1 200 Fine Thank You\r\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& name = texts[i];
    const std::string& value = texts[texts.size() - 1 - i];
    response.headers.push_back({name, value});
    expected += name + ": " + value + "\r\n";
  }
  expected += "Content-Length: 1234567\r\n\r\n";
  std::string out = "kept";
  append_client_head(out, {response, ClientFraming::kLength, true, 1, false});
  EXPECT_EQ(out, "kept" + expected);

  out.clear();
  append_client_head(out, {response, ClientFraming::kChunked, false, 1, false});
  const std::string fields = expected.substr(0, expected.size() - 27);  // without Content-Length
  EXPECT_EQ(out, fields + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
}

}  // namespace
}  // namespace ucp::proxy::detail
