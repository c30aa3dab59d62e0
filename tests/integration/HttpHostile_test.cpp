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

#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// What came back for one request: a response, the connection's end, or neither in time.
struct Reply {
  enum class Kind { kResponse, kClosed, kTimedOut, kGarbled };
  Kind kind = Kind::kTimedOut;
  int status = 0;
  std::string head;  // status line and headers
  std::string detail;
};

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

/// Reads one HTTP response (head and Content-Length body) from `fd`; bytes beyond it stay in
/// `pending` for the next call.
Reply read_reply(int fd, std::string& pending, int64_t timeout_ms) {
  const Deadline deadline(timeout_ms);
  char buffer[16384];
  auto fill = [&]() -> Reply {
    auto n = recv_some(fd, buffer, deadline.remaining_ms());
    Reply r;
    if (!n) {
      r.kind = n.error() == std::errc::timed_out ? Reply::Kind::kTimedOut : Reply::Kind::kClosed;
      r.detail = n.error().message();
      return r;
    }
    if (*n == 0) {
      r.kind = Reply::Kind::kClosed;
      r.detail = "EOF";
      return r;
    }
    pending.append(buffer, *n);
    r.kind = Reply::Kind::kResponse;
    return r;
  };
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    Reply r = fill();
    if (r.kind == Reply::Kind::kResponse) continue;
    if (!pending.empty() && r.kind == Reply::Kind::kClosed) {
      r.kind = Reply::Kind::kGarbled;
      r.detail = "connection ended inside a response head: " + pending.substr(0, 200);
    }
    return r;
  }
  Reply reply;
  reply.head = pending.substr(0, head_end);
  if (reply.head.rfind("HTTP/1.", 0) != 0 || reply.head.size() < 12) {
    reply.kind = Reply::Kind::kGarbled;
    reply.detail = "not a status line: " + reply.head.substr(0, 200);
    return reply;
  }
  reply.status = std::atoi(reply.head.c_str() + 9);
  size_t body = 0;
  const std::string head = lowercase(reply.head);
  if (const size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    body = static_cast<size_t>(std::strtoull(head.c_str() + at + 17, nullptr, 10));
  }
  while (pending.size() < head_end + 4 + body) {
    Reply r = fill();
    if (r.kind != Reply::Kind::kResponse) {
      r.kind = Reply::Kind::kGarbled;
      r.detail = "body cut short: " + r.detail;
      return r;
    }
  }
  pending.erase(0, head_end + 4 + body);
  reply.kind = Reply::Kind::kResponse;
  return reply;
}

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

class HttpHostile : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

TEST_F(HttpHostile, AnswersPipelinedAndHalfClosedRequests) {
  ServerProcess server({"server.protocol=http"});
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

// Slowloris: headers trickling in one byte per 200 ms never complete a request. Each byte
// restarts a per-read timer of 500 ms, so only a deadline for the whole head cuts them off.
TEST_F(HttpHostile, SlowlorisIsCutOffNearTheReadTimeoutWhileOthersAreServed) {
  constexpr int64_t kTimeoutMs = 500;
  constexpr size_t kSlowClients = 20;
  constexpr auto kByteGap = 200ms;
  constexpr int64_t kGiveUpMs = 6000;
  ServerProcess server({"server.protocol=http", "server.read_timeout_ms=500"});
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
  EXPECT_LE(latest, 4 * kTimeoutMs) << "cut off long after read_timeout_ms";
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
::testing::AssertionResult rejected(uint16_t port, const Vector& v, int64_t timeout_ms = 3000) {
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

TEST_F(HttpHostile, MalformedAndOversizedRequestsGet4xxOrCloseNeverAHang) {
  ServerProcess server({"server.protocol=http", "server.read_timeout_ms=30000"});
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

// Framing vectors from IO_URING_PITFALLS.md beyond the list, with a smaller head limit
// (server.max_request_bytes = 8192) so that long targets and many headers exceed it.
TEST_F(HttpHostile, MoreFramingVectorsGet4xxOrClose) {
  ServerProcess server(
      {"server.protocol=http", "server.read_timeout_ms=30000", "server.max_request_bytes=8192"});
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
TEST_F(HttpHostile, BareLineFeedRequestIsRejected) {
  ServerProcess server({"server.protocol=http", "server.read_timeout_ms=30000"});
  UCP_START_SERVER(server);
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_text(fd->get(), "GET / HTTP/1.1\nHost: localhost\n\n"));
  std::string pending;
  const Reply r = read_reply(fd->get(), pending, 3000);
  ASSERT_EQ(r.kind, Reply::Kind::kResponse) << "no answer within 3 s: " << r.detail;
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Chunked request bodies (extensions and trailers included) are read and answered; a body
// split across writes too.
TEST_F(HttpHostile, AnswersChunkedRequestBodies) {
  ServerProcess server({"server.protocol=http"});
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
