// Hostile HTTP clients against bin/proactor_test with server.protocol = http (the pingpong on
// the ucp::http layer): slowloris headers, malformed and oversized requests, half-closed
// peers. The server must answer 4xx and/or close, never crash or hang, and keep serving
// everyone else.
//
// Every test starts its own server on a free loopback port (tests/support/ServerProcess.h);
// every wait is bounded.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "BackendProbe.h"
#include "HttpReply.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// One GET on a fresh connection answered 200: the server still serves.
::testing::AssertionResult served(uint16_t port) {
  auto fd = connect_loopback(port);
  if (!fd) return ::testing::AssertionFailure() << "connect: " << fd.error().message();
  if (auto sent = send_text(fd->get(), kGet); !sent) {
    return ::testing::AssertionFailure() << "send: " << sent.error().message();
  }
  std::string pending;
  const Reply r = read_reply(fd->get(), pending, 5000);
  if (r.kind != Reply::Kind::kResponse || r.status != 200) {
    return ::testing::AssertionFailure() << "no 200 response: " << r.detail << " " << r.head;
  }
  return ::testing::AssertionSuccess();
}

void report(const std::string& key, int64_t value) {
  ::testing::Test::RecordProperty(key, std::to_string(value));
  std::printf("[ figure   ] %s = %lld\n", key.c_str(), static_cast<long long>(value));
}

// Every test runs bin/proactor_test on io_uring and on epoll (event_loop.backend).
class HttpHostile : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ::signal(SIGPIPE, SIG_IGN);
  }
  /// `overrides` plus the backend under test.
  std::vector<std::string> on_backend(std::vector<std::string> overrides) const {
    overrides.push_back("event_loop.backend=" + GetParam());
    return overrides;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, HttpHostile, test::kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

TEST_P(HttpHostile, AnswersPipelinedAndHalfClosedRequests) {
  ServerProcess server(on_backend({"server.protocol=http"}));
  UCP_START_SERVER(server);
  // 100 requests in one write: 100 responses in order on the same connection.
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  std::string batch;
  for (int i = 0; i < 100; ++i) batch += kGet;
  ASSERT_TRUE(send_text(fd->get(), batch));
  std::string pending;
  for (int i = 0; i < 100; ++i) {
    const Reply r = read_reply(fd->get(), pending, 5000);
    ASSERT_EQ(r.kind, Reply::Kind::kResponse) << "response " << i << ": " << r.detail;
    ASSERT_EQ(r.status, 200) << r.head;
  }
  // Request then shutdown(SHUT_WR): the response still arrives, then the close.
  auto half = connect_loopback(server.port());
  ASSERT_TRUE(half);
  ASSERT_TRUE(send_text(half->get(), kGet));
  ::shutdown(half->get(), SHUT_WR);
  pending.clear();
  const Reply r = read_reply(half->get(), pending, 5000);
  ASSERT_EQ(r.kind, Reply::Kind::kResponse) << r.detail;
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(drain_until_closed(half->get(), 5000)) << "not closed after the half-close";
  // The same bytes split at every offset still make one request.
  for (size_t split = 1; split < kGet.size(); split += 3) {
    auto c = connect_loopback(server.port());
    ASSERT_TRUE(c);
    ASSERT_TRUE(send_text(c->get(), kGet.substr(0, split)));
    std::this_thread::sleep_for(2ms);
    ASSERT_TRUE(send_text(c->get(), kGet.substr(split)));
    pending.clear();
    const Reply s = read_reply(c->get(), pending, 5000);
    ASSERT_EQ(s.kind, Reply::Kind::kResponse) << "split at " << split << ": " << s.detail;
    EXPECT_EQ(s.status, 200);
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

/// Sends `first`, pauses so that the server reads it on its own (it then holds an unfinished
/// request), sends `rest`, and reads `expected` responses. Returns how many were 200, stopping
/// at the first that is missing or not 200.
size_t answers_after_a_pause(uint16_t port, std::string_view first, std::string_view rest,
                             size_t expected, std::string& why) {
  auto fd = connect_loopback(port);
  if (!fd) {
    why = "connect: " + fd.error().message();
    return 0;
  }
  if (auto sent = send_text(fd->get(), first); !sent) {
    why = "send: " + sent.error().message();
    return 0;
  }
  std::this_thread::sleep_for(100ms);
  if (auto sent = send_text(fd->get(), rest); !sent) {
    why = "send: " + sent.error().message();
    return 0;
  }
  std::string pending;
  for (size_t i = 0; i < expected; ++i) {
    const Reply r = read_reply(fd->get(), pending, 5000);
    if (r.kind != Reply::Kind::kResponse || r.status != 200) {
      why = "response " + std::to_string(i) + ": " +
            (r.kind == Reply::Kind::kResponse ? r.head.substr(0, 40) : r.detail);
      return i;
    }
  }
  return expected;
}

std::string pipelined_gets(size_t count) {
  std::string batch;
  for (size_t i = 0; i < count; ++i) batch += kGet;
  return batch;
}

// Requests that arrive together with the end of an unfinished one are each answered: the
// buffer for the unfinished request is consumed as it is parsed, so small pipelined requests
// behind it never count against the size limit of one request.
TEST_P(HttpHostile, PipelinedRequestsBehindABufferedPartialRequestAreAllAnswered) {
  ServerProcess server(on_backend({"server.protocol=http", "server.max_request_bytes=1024"}));
  UCP_START_SERVER(server);
  const std::string batch = pipelined_gets(101);  // 101 x 37 bytes: over 2 x 1024
  std::string why;
  const size_t answered =
      answers_after_a_pause(server.port(), batch.substr(0, 10), batch.substr(10), 101, why);
  report("pipelined_after_partial_answered", static_cast<int64_t>(answered));
  EXPECT_EQ(answered, 101u) << why;
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// The largest request the limits allow (a head of exactly max_request_bytes and a body of
// max_request_bytes), whose last bytes arrive together with 100 more requests: 101 answers.
// A 128 KiB burst also makes the multishot receive pause for back-pressure, which must not
// show either.
TEST_P(HttpHostile, LargestLegalRequestWithPipelinedRequestsBehindItIsAnswered) {
  constexpr size_t kLimit = 65536;  // the default server.max_request_bytes
  ServerProcess server(on_backend({"server.protocol=http"}));
  UCP_START_SERVER(server);
  std::string head =
      "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(kLimit) +
      "\r\nX-Pad: ";
  head += std::string(kLimit - head.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(head.size(), kLimit);
  const std::string request = head + std::string(kLimit, 'b');
  const std::string rest = request.substr(request.size() - 100) + pipelined_gets(100);
  std::string why;
  const size_t answered = answers_after_a_pause(
      server.port(), std::string_view(request).substr(0, request.size() - 100), rest, 101, why);
  report("largest_request_then_pipelined_answered", static_cast<int64_t>(answered));
  EXPECT_EQ(answered, 101u) << why;
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// A request over the limit that arrives behind legal ones, all together with the end of a
// buffered request: the legal ones are answered in order, then the oversized one gets its 431
// and the connection closes.
TEST_P(HttpHostile, OversizedRequestBehindLegalOnesGetsItsStatusAfterTheirAnswers) {
  ServerProcess server(on_backend({"server.protocol=http", "server.max_request_bytes=1024"}));
  UCP_START_SERVER(server);
  const std::string legal = pipelined_gets(6);
  const std::string oversized =
      "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(4096, 'b') + "\r\n\r\n";
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), legal.substr(0, 10)));
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(send_text(fd->get(), legal.substr(10) + oversized));
  std::string pending;
  for (int i = 0; i < 6; ++i) {
    const Reply r = read_reply(fd->get(), pending, 5000);
    ASSERT_EQ(r.kind, Reply::Kind::kResponse) << "response " << i << ": " << r.detail;
    ASSERT_EQ(r.status, 200) << r.head;
  }
  const Reply refused = read_reply(fd->get(), pending, 5000);
  ASSERT_EQ(refused.kind, Reply::Kind::kResponse) << refused.detail;
  EXPECT_EQ(refused.status, 431) << refused.head;
  EXPECT_TRUE(drain_until_closed(fd->get(), 5000)) << "not closed after the 431";
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Many pipelined requests sent in pieces of every size around the limit, each piece ending
// inside a request: every request is answered, in order.
TEST_P(HttpHostile, PipelinedRequestsSplitAnywhereAreAllAnswered) {
  ServerProcess server(on_backend({"server.protocol=http", "server.max_request_bytes=1024"}));
  UCP_START_SERVER(server);
  const std::string body(1000, 'x');
  std::string one = "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n";
  one += body;
  std::string batch;
  constexpr size_t kRequests = 60;
  for (size_t i = 0; i < kRequests; ++i) batch += (i % 3 == 0) ? std::string(kGet) : one;
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  // Piece sizes from 1 byte to 3 x the limit, so that a piece both finishes a buffered request
  // and carries several more.
  size_t sent = 0;
  for (size_t piece = 1; sent < batch.size(); piece = piece * 3 % 3072 + 7) {
    const size_t n = std::min(piece, batch.size() - sent);
    ASSERT_TRUE(send_text(fd->get(), std::string_view(batch).substr(sent, n)));
    sent += n;
    std::this_thread::sleep_for(1ms);
  }
  std::string pending;
  size_t answered = 0;
  for (; answered < kRequests; ++answered) {
    const Reply r = read_reply(fd->get(), pending, 5000);
    if (r.kind != Reply::Kind::kResponse || r.status != 200) {
      ADD_FAILURE() << "response " << answered << ": " << r.detail << r.head.substr(0, 40);
      break;
    }
  }
  EXPECT_EQ(answered, kRequests);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Slowloris: headers trickling in one byte per 200 ms never complete a request. Each byte
// restarts a per-read timer of 500 ms, so only a deadline for the whole head cuts them off:
// a server without one keeps them all open for as long as they trickle (here up to 30 s, 60
// times the timeout). How soon they were cut off is reported, not asserted: on a loaded
// machine this client's own loop runs late too.
TEST_P(HttpHostile, SlowlorisIsCutOffNearTheReadTimeoutWhileOthersAreServed) {
  constexpr int64_t kTimeoutMs = 500;
  constexpr size_t kSlowClients = 20;
  constexpr auto kByteGap = 200ms;
  constexpr int64_t kGiveUpMs = 30000;
  ServerProcess server(on_backend({"server.protocol=http", "server.read_timeout_ms=500"}));
  UCP_START_SERVER(server);
  std::vector<UniqueFd> slow;
  for (size_t i = 0; i < kSlowClients; ++i) {
    auto fd = connect_loopback(server.port());
    ASSERT_TRUE(fd);
    ASSERT_TRUE(send_text(fd->get(), "GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "));
    slow.push_back(std::move(*fd));
  }
  const auto start = Clock::now();
  std::vector<int64_t> cut_off_ms(kSlowClients, -1);
  size_t open = kSlowClients;
  size_t others_served = 0;
  while (open > 0 && Clock::now() - start < std::chrono::milliseconds(kGiveUpMs)) {
    std::this_thread::sleep_for(kByteGap);
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    for (size_t i = 0; i < kSlowClients; ++i) {
      if (cut_off_ms[i] >= 0) continue;
      // Closed (EOF, RST, or a 408 then EOF)? Then record when; otherwise one more byte.
      char sink[512];
      auto n = recv_some(slow[i].get(), sink, 0);
      const bool closed = (n && *n == 0) || (!n && n.error() != std::errc::timed_out) ||
                          !send_text(slow[i].get(), "a", 100);
      if (closed || (n && *n > 0)) {
        cut_off_ms[i] = now_ms;
        --open;
      }
    }
    if (served(server.port())) ++others_served;
  }
  int64_t latest = 0;
  for (int64_t ms : cut_off_ms) latest = std::max(latest, ms < 0 ? kGiveUpMs : ms);
  report("slowloris_latest_cut_off_ms", latest);
  report("slowloris_others_served", static_cast<int64_t>(others_served));
  EXPECT_EQ(open, 0u) << open << " of " << kSlowClients
                      << " slowloris connections still open after " << kGiveUpMs
                      << " ms with read_timeout_ms " << kTimeoutMs
                      << ": the read timeout restarts on every byte of the head";
  EXPECT_GT(others_served, 0u);
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

struct Vector {
  const char* name;
  std::string bytes;
};

/// Sends `bytes` on a fresh connection and expects a 4xx response and/or the close within
/// `timeout_ms`; never a 2xx, never silence.
::testing::AssertionResult rejected(uint16_t port, const Vector& v, int64_t timeout_ms = 10000) {
  auto fd = connect_loopback(port);
  if (!fd) return ::testing::AssertionFailure() << v.name << ": connect: " << fd.error().message();
  (void)send_text(fd->get(), v.bytes, timeout_ms);  // a reset while sending counts as a close
  std::string pending;
  const Reply r = read_reply(fd->get(), pending, timeout_ms);
  switch (r.kind) {
    case Reply::Kind::kClosed:
      return ::testing::AssertionSuccess() << v.name << ": closed (" << r.detail << ")";
    case Reply::Kind::kTimedOut:
      return ::testing::AssertionFailure()
             << v.name << ": neither a response nor a close within " << timeout_ms << " ms";
    case Reply::Kind::kGarbled:
      return ::testing::AssertionFailure() << v.name << ": " << r.detail;
    case Reply::Kind::kResponse:
      break;
  }
  // 4xx: a Transfer-Encoding other than chunked is a framing error (400, RFC 9112 §6.1).
  if (r.status < 400 || r.status > 499) {
    return ::testing::AssertionFailure() << v.name << ": answered " << r.head.substr(0, 100);
  }
  // After a 4xx for a malformed frame the connection must not carry on (no second request
  // from ambiguous bytes): it closes.
  auto closed = drain_until_closed(fd->get(), timeout_ms);
  if (!closed) {
    return ::testing::AssertionFailure()
           << v.name << ": " << r.status << " but not closed (" << closed.error().message() << ")";
  }
  return ::testing::AssertionSuccess() << v.name << ": " << r.status;
}

TEST_P(HttpHostile, MalformedAndOversizedRequestsGet4xxOrCloseNeverAHang) {
  ServerProcess server(on_backend({"server.protocol=http", "server.read_timeout_ms=30000"}));
  UCP_START_SERVER(server);
  const std::string post = "POST / HTTP/1.1\r\nHost: localhost\r\n";
  const std::vector<Vector> vectors = {
      {"bad request line", "GARBAGE\r\n\r\n"},
      {"request line without version", "GET /\r\nHost: localhost\r\n\r\n"},
      {"unknown version", "GET / HTTP/1.32\r\nHost: localhost\r\n\r\n"},
      {"space in method", "G ET / HTTP/1.1\r\nHost: localhost\r\n\r\n"},
      {"header without colon", "GET / HTTP/1.1\r\nHost localhost\r\n\r\n"},
      {"64 KiB header",
       "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(65536, 'b') + "\r\n\r\n"},
      {"1 MiB request line without end", "GET /" + std::string(1u << 20, 'a')},
      {"Content-Length: abc", post + "Content-Length: abc\r\n\r\n"},
      {"Content-Length: -1", post + "Content-Length: -1\r\n\r\n"},
      {"Content-Length: +5", post + "Content-Length: +5\r\n\r\nhello"},
      {"Content-Length: 0x10", post + "Content-Length: 0x10\r\n\r\n"},
      {"Content-Length overflow", post + "Content-Length: 99999999999999999999999\r\n\r\n"},
      {"duplicate differing Content-Length",
       post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
      {"Transfer-Encoding + Content-Length",
       post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"Content-Length + Transfer-Encoding",
       post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"NUL in a header value", std::string("GET / HTTP/1.1\r\nHost: local\0host\r\n\r\n", 37)},
  };
  for (const auto& v : vectors) {
    const auto result = rejected(server.port(), v);
    EXPECT_TRUE(result);
    std::printf("[ vector   ] %s\n", result.message());
    ASSERT_TRUE(server.alive()) << v.name
                                << " killed the server: " << server.exit_status()->describe()
                                << "\n"
                                << server.output_tail();
  }
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Framing vectors (docs/design.md, section 9) beyond the first test's list, with a smaller head
// limit (server.max_request_bytes = 8192) so that long targets and many headers exceed it.
TEST_P(HttpHostile, MoreFramingVectorsGet4xxOrClose) {
  ServerProcess server(on_backend(
      {"server.protocol=http", "server.read_timeout_ms=30000", "server.max_request_bytes=8192"}));
  UCP_START_SERVER(server);
  const std::string post = "POST / HTTP/1.1\r\nHost: localhost\r\n";
  const std::vector<Vector> vectors = {
      {"Content-Length: 42, 42 list", post + "Content-Length: 5, 6\r\n\r\nhello!"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : localhost\r\n\r\n"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n b\r\n\r\n"},
      {"Transfer-Encoding: pigeons", post + "Transfer-Encoding: pigeons\r\n\r\n"},
      {"16 KiB request target", "GET /" + std::string(16384, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"1000 small headers",
       [] {
         std::string r = "GET / HTTP/1.1\r\nHost: localhost\r\n";
         for (int i = 0; i < 1000; ++i) r += "X-" + std::to_string(i) + ": v\r\n";
         return r + "\r\n";
       }()},
      {"Content-Length beyond max_request_bytes", post + "Content-Length: 100000000\r\n\r\n"},
  };
  for (const auto& v : vectors) {
    const auto result = rejected(server.port(), v);
    std::printf("[ vector   ] %s%s\n", result ? "" : "FAILED ", result.message());
    EXPECT_TRUE(result);
    ASSERT_TRUE(server.alive()) << v.name << " killed the server";
  }
  EXPECT_TRUE(served(server.port()));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Bare LF line endings ("GET / HTTP/1.1\nHost: x\n\n"): RFC 9112 §2.2 lets a server reject
// them or accept them; llhttp in strict mode rejects them (400), and the server must not
// wait for a CRLF CRLF that never comes.
TEST_P(HttpHostile, BareLineFeedRequestIsRejected) {
  ServerProcess server(on_backend({"server.protocol=http", "server.read_timeout_ms=30000"}));
  UCP_START_SERVER(server);
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET / HTTP/1.1\nHost: localhost\n\n"));
  std::string pending;
  const Reply r = read_reply(fd->get(), pending, 10000);
  ASSERT_EQ(r.kind, Reply::Kind::kResponse) << "no answer within 10 s: " << r.detail;
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Chunked request bodies (extensions and trailers included) are read and answered; a body
// split across writes too.
TEST_P(HttpHostile, AnswersChunkedRequestBodies) {
  ServerProcess server(on_backend({"server.protocol=http"}));
  UCP_START_SERVER(server);
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  const std::string chunked =
      "POST /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;name=\"v\"\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  std::string pending;
  for (size_t split : {chunked.size(), chunked.size() / 2, size_t{70}}) {
    ASSERT_TRUE(send_text(fd->get(), chunked.substr(0, split)));
    std::this_thread::sleep_for(2ms);
    ASSERT_TRUE(send_text(fd->get(), chunked.substr(split)));
    const Reply r = read_reply(fd->get(), pending, 5000);
    ASSERT_EQ(r.kind, Reply::Kind::kResponse) << "split at " << split << ": " << r.detail;
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
