// The PROXY protocol: byte-exact headers against the examples of HAProxy's specification
// (doc/proxy-protocol.txt), strict parsing (what is refused, and how early), and
// read_proxy_header over a real socket: split headers, bytes after the header, timeouts.

#include "ucp/proxy/ProxyProtocol.h"

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/net/Socket.h"

#include "LoopRunner.h"
#include "LoopbackClient.h"

namespace ucp::proxy {
namespace {

using namespace std::chrono_literals;

InetAddress address(const std::string& ip, uint16_t port) { return *InetAddress::parse(ip, port); }

std::string v1(const InetAddress& source, const InetAddress& destination) {
  std::array<char, kProxyV1MaxBytes> out;
  return std::string(out.data(), encode_proxy_v1(source, destination, out));
}

std::vector<uint8_t> v2(const InetAddress& source, const InetAddress& destination) {
  std::array<std::byte, kProxyV2MaxEncoded> out;
  const size_t n = encode_proxy_v2(source, destination, out);
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<uint8_t>(out[i]));
  return bytes;
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

ProxyParse parse(const std::string& text, ProxyHeader& header) {
  return parse_proxy_header(bytes_of(text), header);
}

std::string from_bytes(std::vector<uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

const std::vector<uint8_t> kSignature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                         0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

std::vector<uint8_t> v2_header(uint8_t version_command, uint8_t family,
                               std::vector<uint8_t> block) {
  std::vector<uint8_t> out = kSignature;
  out.push_back(version_command);
  out.push_back(family);
  out.push_back(static_cast<uint8_t>(block.size() >> 8));
  out.push_back(static_cast<uint8_t>(block.size() & 0xff));
  out.insert(out.end(), block.begin(), block.end());
  return out;
}

// ---- sending: the specification's examples, byte for byte ----

TEST(ProxyProtocol, V1LineIsTheSpecificationsExample) {
  EXPECT_EQ(v1(address("192.168.0.1", 56324), address("192.168.0.11", 443)),
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n");
}

TEST(ProxyProtocol, V1LongestLinesHaveTheSpecificationsLengths) {
  const std::string tcp4 = v1(address("255.255.255.255", 65535), address("255.255.255.255", 65535));
  EXPECT_EQ(tcp4, "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n");
  EXPECT_EQ(tcp4.size(), 56u);
  const std::string full = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  const std::string tcp6 = v1(address(full, 65535), address(full, 65535));
  EXPECT_EQ(tcp6, "PROXY TCP6 " + full + " " + full + " 65535 65535\r\n");
  EXPECT_EQ(tcp6.size(), 104u);
  EXPECT_EQ(v1(InetAddress{}, InetAddress{}), "PROXY UNKNOWN\r\n");
}

TEST(ProxyProtocol, V1MixedFamiliesAreWrittenAsTcp6InHexGroups) {
  // IPv4-mapped, in hex groups (no dotted quad: the specification's IPv6 form).
  EXPECT_EQ(v1(address("10.0.0.1", 1000), address("::1", 80)),
            "PROXY TCP6 ::ffff:a00:1 ::1 1000 80\r\n");
  ProxyHeader parsed;
  ASSERT_EQ(parse(v1(address("10.0.0.1", 1000), address("::1", 80)), parsed), ProxyParse::kDone);
  EXPECT_EQ(parsed.source, address("::ffff:10.0.0.1", 1000));
}

TEST(ProxyProtocol, V1Ipv6IsCompressedLikeRfc5952) {
  EXPECT_EQ(v1(address("2001:db8:0:0:1:0:0:1", 1), address("1::", 2)),
            "PROXY TCP6 2001:db8::1:0:0:1 1:: 1 2\r\n");
  EXPECT_EQ(v1(address("::", 1), address("1:2:3:4:5:6:7:8", 2)),
            "PROXY TCP6 :: 1:2:3:4:5:6:7:8 1 2\r\n");
  EXPECT_EQ(v1(address("1:0:2:0:3:0:4:0", 1), address("0:0:1::", 2)),
            "PROXY TCP6 1:0:2:0:3:0:4:0 0:0:1:: 1 2\r\n");
}

TEST(ProxyProtocol, V2Ipv4BlockIsExact) {
  // 192.168.0.1:56324 -> 192.168.0.11:443: signature, 0x21 (v2, PROXY), 0x11 (TCP over IPv4),
  // length 12, then the addresses and ports in network order.
  std::vector<uint8_t> expected = kSignature;
  for (uint8_t b :
       {0x21, 0x11, 0x00, 0x0C, 192, 168, 0, 1, 192, 168, 0, 11, 0xDC, 0x04, 0x01, 0xBB})
    expected.push_back(b);
  EXPECT_EQ(v2(address("192.168.0.1", 56324), address("192.168.0.11", 443)), expected);
}

TEST(ProxyProtocol, V2Ipv6BlockIsExact) {
  std::vector<uint8_t> expected = kSignature;
  for (uint8_t b : {0x21, 0x21, 0x00, 0x24}) expected.push_back(b);
  std::vector<uint8_t> source(16, 0), destination(16, 0);
  source[0] = 0x20, source[1] = 0x01, source[2] = 0x0d, source[3] = 0xb8, source[15] = 0x01;
  destination[15] = 0x01;  // ::1
  expected.insert(expected.end(), source.begin(), source.end());
  expected.insert(expected.end(), destination.begin(), destination.end());
  for (uint8_t b : {0x30, 0x39, 0x00, 0x50}) expected.push_back(b);  // 12345, 80
  EXPECT_EQ(v2(address("2001:db8::1", 12345), address("::1", 80)), expected);
}

TEST(ProxyProtocol, V2LocalIsTheBareHeader) {
  std::array<std::byte, kProxyV2MaxEncoded> out;
  const size_t n = encode_proxy_v2_local(out);
  std::vector<uint8_t> got;
  for (size_t i = 0; i < n; ++i) got.push_back(static_cast<uint8_t>(out[i]));
  EXPECT_EQ(got, v2_header(0x20, 0x00, {}));
}

// ---- accepting ----

TEST(ProxyProtocol, ParsesWhatItSends) {
  const InetAddress client = address("203.0.113.9", 40000);
  const InetAddress local = address("198.51.100.1", 8000);
  for (const std::string& header : {v1(client, local), from_bytes(v2(client, local))}) {
    ProxyHeader parsed;
    ASSERT_EQ(parse(header + "payload", parsed), ProxyParse::kDone);
    EXPECT_FALSE(parsed.local);
    EXPECT_EQ(parsed.source, client);
    EXPECT_EQ(parsed.destination, local);
    EXPECT_EQ(parsed.length, header.size());
  }
  const InetAddress client6 = address("2001:db8::7", 1);
  ProxyHeader parsed;
  ASSERT_EQ(parse(v1(client6, address("::1", 2)), parsed), ProxyParse::kDone);
  EXPECT_EQ(parsed.source, client6);
  ASSERT_EQ(parse(from_bytes(v2(client6, address("::1", 2))), parsed), ProxyParse::kDone);
  EXPECT_EQ(parsed.source, client6);
}

TEST(ProxyProtocol, AcceptsUnknownAndLocalWithoutAddresses) {
  ProxyHeader parsed;
  ASSERT_EQ(parse("PROXY UNKNOWN\r\n", parsed), ProxyParse::kDone);
  EXPECT_TRUE(parsed.local);
  EXPECT_EQ(parsed.length, 15u);
  const std::string full = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  const std::string worst = "PROXY UNKNOWN " + full + " " + full + " 65535 65535\r\n";
  ASSERT_EQ(worst.size(), 107u);  // the longest line the specification allows
  ASSERT_EQ(parse(worst, parsed), ProxyParse::kDone);
  EXPECT_TRUE(parsed.local);
  // LOCAL with an address block (to be skipped), UNSPEC, UDP: the connection's endpoints stand.
  ASSERT_EQ(parse(from_bytes(v2_header(0x20, 0x11, std::vector<uint8_t>(12, 1))), parsed),
            ProxyParse::kDone);
  EXPECT_TRUE(parsed.local);
  EXPECT_EQ(parsed.length, 28u);
  ASSERT_EQ(parse(from_bytes(v2_header(0x21, 0x00, {})), parsed), ProxyParse::kDone);
  EXPECT_TRUE(parsed.local);
  ASSERT_EQ(parse(from_bytes(v2_header(0x21, 0x12, std::vector<uint8_t>(12, 1))), parsed),
            ProxyParse::kDone);
  EXPECT_TRUE(parsed.local);
}

TEST(ProxyProtocol, SkipsWellFormedTlvs) {
  std::vector<uint8_t> block = {10, 0, 0, 1, 10, 0, 0, 2, 0x00, 0x50, 0x01, 0xBB};
  for (uint8_t b : {0x02, 0x00, 0x03, 0x61, 0x70, 0x70, 0x04, 0x00, 0x00}) block.push_back(b);
  ProxyHeader parsed;
  ASSERT_EQ(parse(from_bytes(v2_header(0x21, 0x11, block)), parsed), ProxyParse::kDone);
  EXPECT_EQ(parsed.source, address("10.0.0.1", 80));
  EXPECT_EQ(parsed.destination, address("10.0.0.2", 443));
}

TEST(ProxyProtocol, EveryPrefixOfAValidHeaderAsksForMore) {
  const std::string one = v1(address("10.1.2.3", 5), address("10.3.2.1", 6));
  const std::string two = from_bytes(v2(address("10.1.2.3", 5), address("10.3.2.1", 6)));
  for (const std::string& header : {one, two}) {
    for (size_t n = 0; n < header.size(); ++n) {
      ProxyHeader parsed;
      EXPECT_EQ(parse(header.substr(0, n), parsed), ProxyParse::kIncomplete) << n;
    }
  }
}

TEST(ProxyProtocol, RefusesAsSoonAsAByteShowsItIsNoHeader) {
  ProxyHeader parsed;
  EXPECT_EQ(parse("G", parsed), ProxyParse::kInvalid);  // an HTTP request: no guessing
  EXPECT_EQ(parse("PROXZ", parsed), ProxyParse::kInvalid);
  EXPECT_EQ(parse("\r\n\r\n\x01", parsed), ProxyParse::kInvalid);
  EXPECT_EQ(parse(from_bytes(std::vector<uint8_t>(kSignature.begin(), kSignature.end())) + "\x11",
                  parsed),
            ProxyParse::kInvalid);  // version 1 in a v2 header
}

TEST(ProxyProtocol, RefusesV1LinesThatBendTheRules) {
  for (const char* bad : {
           "PROXY TCP4 192.168.0.01 192.168.0.11 56324 443\r\n",   // leading zero
           "PROXY TCP4 256.168.0.1 192.168.0.11 56324 443\r\n",    // octet over 255
           "PROXY TCP4 192.168.0.1  192.168.0.11 56324 443\r\n",   // two spaces
           "PROXY tcp4 192.168.0.1 192.168.0.11 56324 443\r\n",    // lowercase
           "PROXY TCP4 192.168.0.1 192.168.0.11 65536 443\r\n",    // port over 65535
           "PROXY TCP4 192.168.0.1 192.168.0.11 056324 443\r\n",   // leading zero in a port
           "PROXY TCP4 192.168.0.1 192.168.0.11 56324\r\n",        // a field missing
           "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443 1\r\n",  // a field too many
           "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n",      // LF alone (then no CRLF)
           "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\rX",     // CR alone
           "PROXY TCP4 ::1 ::1 1 2\r\n",                           // IPv6 in TCP4
           "PROXY TCP6 ::ffff:1.2.3.4 ::1 1 2\r\n",                // dotted quad in TCP6
           "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",                   // IPv4 in TCP6
           "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",                   // no such protocol
           "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\x01\r\n",               // a control byte
       }) {
    ProxyHeader parsed;
    std::string why;
    std::string line(bad);
    if (line.back() == '\n' && line[line.size() - 2] != '\r') line += std::string(120, 'x');
    EXPECT_EQ(parse_proxy_header(bytes_of(line), parsed, &why), ProxyParse::kInvalid) << bad;
    EXPECT_FALSE(why.empty());
  }
  // 107 bytes without a CRLF: no header is that long.
  ProxyHeader parsed;
  EXPECT_EQ(parse("PROXY UNKNOWN " + std::string(93, 'f'), parsed), ProxyParse::kInvalid);
  EXPECT_EQ(parse("PROXY UNKNOWN " + std::string(92, 'f'), parsed), ProxyParse::kIncomplete);
}

TEST(ProxyProtocol, RefusesV2HeadersThatBendTheRules) {
  const std::vector<uint8_t> ipv4(12, 1);
  for (const auto& bad : {
           v2_header(0x22, 0x11, ipv4),                         // command 2
           v2_header(0x11, 0x11, ipv4),                         // version 1
           v2_header(0x21, 0x41, ipv4),                         // family 4
           v2_header(0x21, 0x13, ipv4),                         // protocol 3
           v2_header(0x21, 0x11, std::vector<uint8_t>(8, 1)),   // block too short for IPv4
           v2_header(0x21, 0x21, std::vector<uint8_t>(12, 1)),  // block too short for IPv6
           v2_header(0x21, 0x11, {1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 2, 0x04, 0x00}),  // cut TLV
           v2_header(0x21, 0x11, {1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 2, 0x04, 0x00, 0x05, 1}),
       }) {
    ProxyHeader parsed;
    EXPECT_EQ(parse(from_bytes(bad), parsed), ProxyParse::kInvalid);
  }
  // A length beyond the bound is refused from the 16-byte header alone.
  ProxyHeader parsed;
  auto huge = v2_header(0x21, 0x11, {});
  huge[14] = 0x04;  // 1024 + 16 bytes
  EXPECT_EQ(parse(from_bytes(huge), parsed), ProxyParse::kInvalid);
}

// ---- read_proxy_header over a socket ----

struct SocketPair {
  UniqueFd client;  // the test's side
  UniqueFd server;  // read_proxy_header's side
};

SocketPair connected_pair() {
  SocketPair pair;
  auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), {});
  if (!listener) return pair;
  auto client = test::connect_loopback(InetAddress::local_of(listener->get())->port());
  if (!client) return pair;
  pair.client = std::move(*client);
  pair.server =
      UniqueFd(::accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  return pair;
}

struct Outcome {
  Result<ProxyHeader> header = Unexpected{std::errc::invalid_argument};
  std::string rest;
};

/// Runs read_proxy_header on a loop of the backend under test while `send` writes the client's
/// side from another thread.
template <class Send>
Outcome read_header(Send send, uint32_t timeout_ms = 5000) {
  auto loop = test::make_loop(/*provided_buffers=*/64);
  SocketPair pair = connected_pair();
  EXPECT_TRUE(pair.client && pair.server);
  Outcome outcome;
  std::thread sender([&] { send(pair.client.get()); });
  test::run_to_end(*loop, [&]() -> Task<> {
    TcpConnection connection(*loop, std::move(pair.server), InetAddress{}, 0);
    BufferLease rest;
    outcome.header = co_await read_proxy_header(connection, timeout_ms, rest);
    outcome.rest.assign(rest.chars(), rest.size());
    co_await connection.close();
  }());
  sender.join();
  return outcome;
}

TEST(ReadProxyHeader, LeavesTheBytesAfterTheHeaderForTheRelay) {
  auto outcome = read_header([](int fd) {
    EXPECT_TRUE(test::send_text(fd, "PROXY TCP4 10.9.8.7 10.0.0.1 5555 80\r\nGET / HTTP/1.1\r\n"));
  });
  ASSERT_TRUE(outcome.header) << outcome.header.error().message();
  EXPECT_EQ(outcome.header->source, address("10.9.8.7", 5555));
  EXPECT_EQ(outcome.rest, "GET / HTTP/1.1\r\n");
}

TEST(ReadProxyHeader, AcceptsAHeaderSplitAcrossSegments) {
  const std::string header = from_bytes(v2(address("10.9.8.7", 5555), address("10.0.0.1", 80)));
  auto outcome = read_header([&](int fd) {
    for (size_t i = 0; i < header.size(); i += 7) {  // 7 bytes per segment, 20 ms apart
      EXPECT_TRUE(
          test::send_all(fd, std::span(header.data() + i, std::min<size_t>(7, header.size() - i))));
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(test::send_text(fd, "after"));
  });
  ASSERT_TRUE(outcome.header) << outcome.header.error().message();
  EXPECT_EQ(outcome.header->source, address("10.9.8.7", 5555));
  // The payload may come with the header's last segment or after it: whatever arrived together
  // with the header is handed back, nothing else.
  EXPECT_TRUE(outcome.rest.empty() || outcome.rest == "after") << outcome.rest;
}

TEST(ReadProxyHeader, RefusesAConnectionThatSpeaksFirstWithoutAHeader) {
  auto outcome =
      read_header([](int fd) { EXPECT_TRUE(test::send_text(fd, "GET / HTTP/1.1\r\n")); });
  ASSERT_FALSE(outcome.header);
  EXPECT_EQ(outcome.header.error(), std::errc::protocol_error);
}

TEST(ReadProxyHeader, GivesUpAfterTheTimeout) {
  auto outcome = read_header(
      [](int fd) {
        EXPECT_TRUE(test::send_text(fd, "PROXY TCP4 "));  // and nothing more
        char byte;
        (void)test::recv_some(fd, std::span(&byte, 1), 5000);  // until the reader closes
      },
      200);
  ASSERT_FALSE(outcome.header);
  EXPECT_EQ(outcome.header.error(), std::errc::timed_out);
}

TEST(ReadProxyHeader, EndOfStreamBeforeTheHeaderEnds) {
  auto outcome = read_header([](int fd) {
    EXPECT_TRUE(test::send_text(fd, "PROXY TCP4 10.0.0.1"));
    ::shutdown(fd, SHUT_WR);
  });
  ASSERT_FALSE(outcome.header);
  EXPECT_EQ(outcome.header.error(), std::errc::connection_aborted);
}

}  // namespace
}  // namespace ucp::proxy
