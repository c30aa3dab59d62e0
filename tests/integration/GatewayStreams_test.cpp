// bin/ucp_gateway as a process, with the bytes themselves: 100 MiB bodies streamed both ways
// (curl uploading chunked) with the gateway's memory bounded, peers that stop reading or write
// slowly on either side, the PROXY protocol v1/v2 headers byte for byte in HTTP mode, and
// half-close both ways in TCP mode. Each prints the gateway's RSS figures.

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "Command.h"
#include "GatewayProcess.h"
#include "LoopbackClient.h"
#include "ScriptedServer.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

#define SKIP_WITHOUT_GATEWAY()                       \
  if (::access(kGatewayBinary.c_str(), X_OK) != 0) { \
    GTEST_SKIP() << kGatewayBinary << " not built";  \
  }                                                  \
  do {                                               \
  } while (0)

constexpr uint64_t kBig = 100ull << 20;
// Receive buffers kept few (4 MiB per worker) so that a bound on the gateway's memory says
// something against 100 MiB bodies.
const std::vector<std::string> kFewBuffers = {"event_loop.provided_buffers_count=256"};

char pattern(uint64_t i) { return static_cast<char>('a' + i % 26); }

std::string upstream_group(uint16_t port, const std::string& more = "") {
  return "[gateway]\nupstream = app\n[upstream.app]\nservers = 127.0.0.1:" + std::to_string(port) +
         "\n" + more;
}

/// Reads a chunked body from `fd` (after its head; `rest` holds what came with the head),
/// counting its bytes and checking them against pattern(). False on a framing error.
bool read_chunked_body(int fd, std::string rest, uint64_t& bytes, uint64_t& mismatches) {
  std::string buffer = std::move(rest);
  size_t at = 0;
  char chunk[65536];
  auto fill = [&](size_t want) {
    while (buffer.size() - at < want) {
      if (at > 0) {
        buffer.erase(0, at);
        at = 0;
      }
      auto n = recv_some(fd, chunk, 10000);
      if (!n || *n == 0) return false;
      buffer.append(chunk, *n);
    }
    return true;
  };
  for (;;) {
    size_t line_end;
    while ((line_end = buffer.find("\r\n", at)) == std::string::npos) {
      if (!fill(buffer.size() - at + 1)) return false;
    }
    const uint64_t size = std::stoull(buffer.substr(at, line_end - at), nullptr, 16);
    at = line_end + 2;
    if (size == 0) return fill(2);  // the final CRLF (no trailers)
    if (!fill(size + 2)) return false;
    for (uint64_t i = 0; i < size; ++i) mismatches += buffer[at + i] != pattern(bytes + i) ? 1 : 0;
    bytes += size;
    at += size + 2;
  }
}

TEST(GatewayStreams, HundredMiBBodiesStreamBothWaysInBoundedMemory) {
  SKIP_WITHOUT_GATEWAY();
  if (!have_program("curl")) GTEST_SKIP() << "curl is not installed";
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> wrong{0};
  std::atomic<bool> chunked{false};
  ScriptedServer upstream([&](int fd) {
    std::string rest;
    const std::string head = read_head(fd, &rest);
    if (head.empty()) return;
    chunked = head.find("Transfer-Encoding: chunked\r\n") != std::string::npos;
    uint64_t bytes = 0;
    uint64_t mismatches = 0;
    if (!read_chunked_body(fd, std::move(rest), bytes, mismatches)) return;
    received = bytes;
    wrong = mismatches;
    (void)send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBig) + "\r\n\r\n");
    std::string piece(1 << 20, '\0');
    for (uint64_t sent = 0; sent < kBig; sent += piece.size()) {
      for (size_t i = 0; i < piece.size(); ++i) piece[i] = pattern(sent + i);
      if (!send_text(fd, piece, 20000)) return;
    }
  });
  ScratchDir dir;
  std::string body(kBig, '\0');
  for (uint64_t i = 0; i < kBig; ++i) body[i] = pattern(i);
  const std::string file = dir.write("upload.bin", body);
  body.clear();
  body.shrink_to_fit();
  auto gateway = start_gateway(dir, upstream_group(upstream.port()), kFewBuffers);
  ASSERT_TRUE(gateway->alive());
  const int64_t before = gateway->rss_kb();
  const std::string url = "http://127.0.0.1:" + std::to_string(gateway->port()) + "/upload";
  // curl streams the file chunked and the answer to a file of its own.
  const std::string downloaded = dir.path() + "/download.bin";
  auto curl =
      run_command({"curl", "-sS", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file,
                   "-o", downloaded, "-w", "%{http_code} %{size_download}", url},
                  120000);
  ASSERT_EQ(curl.exit_code, 0) << curl.output;
  EXPECT_EQ(curl.output, "200 " + std::to_string(kBig));
  EXPECT_TRUE(chunked.load());  // passed on chunked, as it came
  EXPECT_EQ(received.load(), kBig);
  EXPECT_EQ(wrong.load(), 0u);
  auto cmp = run_command({"cmp", file, downloaded}, 60000);  // the same pattern came back
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  const int64_t peak = gateway->peak_rss_kb();
  std::printf(
      "100 MiB up (chunked) and 100 MiB down through the gateway: RSS %lld KiB before, "
      "peak %lld KiB (+%lld KiB)\n",
      static_cast<long long>(before), static_cast<long long>(peak),
      static_cast<long long>(peak - before));
  EXPECT_LT(peak - before, 32 * 1024);  // a fraction of one body, whatever its size
}

TEST(GatewayStreams, PeersThatStopReadingOnEitherSideBoundTheGatewaysMemory) {
  SKIP_WITHOUT_GATEWAY();
  std::atomic<bool> release{false};
  // An upstream that answers 100 MiB to GET and reads none of a PUT's body.
  ScriptedServer upstream([&](int fd) {
    const std::string head = read_head(fd);
    if (head.rfind("GET", 0) == 0) {
      (void)send_text(fd,
                      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBig) + "\r\n\r\n");
      const std::string piece(1 << 20, 'd');
      for (uint64_t sent = 0; sent < kBig && !release; sent += piece.size()) {
        if (!send_text(fd, piece, 500)) continue;  // the gateway stops taking: retry until released
      }
    } else {
      while (!release) std::this_thread::sleep_for(10ms);
    }
  });
  ScratchDir dir;
  auto gateway = start_gateway(dir, upstream_group(upstream.port()), kFewBuffers);
  ASSERT_TRUE(gateway->alive());
  const int64_t before = gateway->rss_kb();
  // A client that asks for 100 MiB and reads none of it.
  auto reader = connect_loopback(gateway->port());
  ASSERT_TRUE(reader);
  ASSERT_TRUE(send_text(reader->get(), "GET /big HTTP/1.1\r\nHost: g\r\n\r\n"));
  // A client that sends 100 MiB to a server that reads none of it.
  auto writer = connect_loopback(gateway->port());
  ASSERT_TRUE(writer);
  ASSERT_TRUE(send_text(writer->get(), "PUT /big HTTP/1.1\r\nHost: g\r\nContent-Length: " +
                                           std::to_string(kBig) + "\r\n\r\n"));
  const std::string piece(1 << 20, 'u');
  uint64_t pushed = 0;
  for (int i = 0; i < 100; ++i) {
    if (!send_text(writer->get(), piece, 100)) break;  // the window closed: back-pressure
    pushed += piece.size();
  }
  std::this_thread::sleep_for(1500ms);  // the downstream push runs into its bounds meanwhile
  const int64_t stalled = gateway->rss_kb();
  std::printf(
      "a client not reading a 100 MiB answer and a server not reading a 100 MiB body "
      "(the client got %llu MiB into the kernel before the window closed): gateway RSS "
      "%lld -> %lld KiB\n",
      static_cast<unsigned long long>(pushed >> 20), static_cast<long long>(before),
      static_cast<long long>(stalled));
  EXPECT_LT(pushed, kBig);  // the upload stalled instead of being taken in
  EXPECT_LT(stalled - before, 24 * 1024);
  release = true;
  reader->reset();
  writer->reset();
  EXPECT_TRUE(gateway->alive());
}

TEST(GatewayStreams, ASlowWritingServerIsPassedOnAsItWrites) {
  SKIP_WITHOUT_GATEWAY();
  ScriptedServer upstream([](int fd) {
    if (read_head(fd).empty()) return;
    (void)send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    for (int i = 0; i < 100; ++i) {
      (void)send_text(fd, std::string(1, pattern(static_cast<uint64_t>(i))));
      std::this_thread::sleep_for(5ms);
    }
  });
  ScratchDir dir;
  auto gateway = start_gateway(dir, upstream_group(upstream.port(), "idle_timeout_ms = 2000\n"));
  ASSERT_TRUE(gateway->alive());
  std::string expected;
  for (int i = 0; i < 100; ++i) expected.push_back(pattern(static_cast<uint64_t>(i)));
  EXPECT_EQ(http_get(gateway->port(), "/"), expected);
}

TEST(GatewayStreams, ProxyProtocolHeadersAreExactInHttpMode) {
  SKIP_WITHOUT_GATEWAY();
  for (const std::string version : {"v1", "v2"}) {
    std::string first;
    std::atomic<bool> done{false};
    ScriptedServer upstream([&](int fd) {
      char bytes[256];
      auto n = recv_some(fd, bytes, 5000);  // the header and (some of) the request
      if (n) first.assign(bytes, *n);
      std::string rest = first;
      // Until the request's head has come whole (v2's signature holds a CRLF CRLF of its own).
      auto head_complete = [](const std::string& text) {
        const size_t get = text.find("GET ");
        return get != std::string::npos && text.find("\r\n\r\n", get) != std::string::npos;
      };
      while (!head_complete(rest)) {
        auto more = recv_some(fd, bytes, 5000);
        if (!more || *more == 0) break;
        rest.append(bytes, *more);
        first = rest;
      }
      done = true;
      (void)send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    ScratchDir dir;
    auto gateway =
        start_gateway(dir, upstream_group(upstream.port(), "proxy_protocol = " + version + "\n"));
    ASSERT_TRUE(gateway->alive());
    auto client = connect_loopback(gateway->port());
    ASSERT_TRUE(client);
    sockaddr_in local{};
    socklen_t length = sizeof local;
    ::getsockname(client->get(), reinterpret_cast<sockaddr*>(&local), &length);
    const uint16_t client_port = ntohs(local.sin_port);
    std::string pending;
    ASSERT_TRUE(send_text(client->get(), "GET / HTTP/1.1\r\nHost: g\r\n\r\n"));
    auto reply = read_response(client->get(), pending, 5000);
    ASSERT_TRUE(reply && reply->body == "ok") << version;
    std::string expected;
    if (version == "v1") {
      expected = "PROXY TCP4 127.0.0.1 127.0.0.1 " + std::to_string(client_port) + " " +
                 std::to_string(gateway->port()) + "\r\n";
    } else {
      expected = std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" + std::string("\0\x0c", 2) +
                 std::string("\x7f\0\0\x01\x7f\0\0\x01", 8);
      expected.push_back(static_cast<char>(client_port >> 8));
      expected.push_back(static_cast<char>(client_port & 0xff));
      expected.push_back(static_cast<char>(gateway->port() >> 8));
      expected.push_back(static_cast<char>(gateway->port() & 0xff));
    }
    ASSERT_TRUE(done.load()) << version;
    EXPECT_EQ(first.substr(0, expected.size()), expected) << version;
    EXPECT_EQ(first.substr(expected.size(), 16), "GET / HTTP/1.1\r\n") << version;
  }
}

TEST(GatewayStreams, HalfCloseGoesThroughBothWaysInTcpMode) {
  SKIP_WITHOUT_GATEWAY();
  std::promise<std::string> after_fin;
  // The server says hello, ends its side, and still reads what the client sends after that.
  ScriptedServer upstream([&](int fd) {
    (void)send_text(fd, "hello");
    ::shutdown(fd, SHUT_WR);
    char bytes[64];
    std::string got;
    for (;;) {
      auto n = recv_some(fd, bytes, 5000);
      if (!n || *n == 0) break;
      got.append(bytes, *n);
    }
    after_fin.set_value(got);  // at the client's FIN
  });
  ScratchDir dir;
  auto gateway = start_gateway(dir,
                               "[gateway]\nmode = tcp\nupstream = app\n[upstream.app]\n"
                               "servers = 127.0.0.1:" +
                                   std::to_string(upstream.port()) + "\n");
  ASSERT_TRUE(gateway->alive());
  auto client = connect_loopback(gateway->port());
  ASSERT_TRUE(client);
  char bytes[64];
  std::string hello;
  for (;;) {  // the server's bytes, then its FIN
    auto n = recv_some(client->get(), bytes, 5000);
    ASSERT_TRUE(n) << n.error().message();
    if (*n == 0) break;
    hello.append(bytes, *n);
  }
  EXPECT_EQ(hello, "hello");
  ASSERT_TRUE(send_text(client->get(), "still here"));  // the other direction is open
  ::shutdown(client->get(), SHUT_WR);
  auto got = after_fin.get_future();
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "still here");
}

}  // namespace
}  // namespace ucp::test
