// bin/proactor_test --set server.protocol=udp_echo as a process, on both backends: every
// datagram comes back to its sender unchanged (0 to 65,507 bytes; IPv6 too), a flood loses
// only whole datagrams and never stops the server, two workers share the port, the socket
// buffer is what was asked for or a WARN says what the kernel gave, SIGTERM exits 0, and with
// server.udp_metrics_port GET /metrics counts the traffic exactly (promtool reads it too).

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "BackendProbe.h"
#include "ExternalProcess.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "Promtool.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

constexpr size_t kMaxIpv4Payload = 65507;
constexpr int kEchoTimeoutMs = 10000;  // a lost echo waits this long: generous for a loaded host

// Size s carries bytes (i * 13 + s) & 0xFF.
std::string datagram_of(size_t size) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 13 + size) & 0xFF);
  return out;
}

// A blocking UDP client of `family` with a receive timeout (kEchoTimeoutMs unless set).
struct UdpClient {
  UniqueFd fd;
  sockaddr_storage server{};
  socklen_t server_length = 0;

  UdpClient(int family, uint16_t port) {
    fd = UniqueFd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (family == AF_INET6) {
      auto& a = reinterpret_cast<sockaddr_in6&>(server);
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      a.sin6_port = htons(port);
      server_length = sizeof a;
    } else {
      auto& a = reinterpret_cast<sockaddr_in&>(server);
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      server_length = sizeof a;
    }
    int bytes = 4 << 20;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    set_timeout_ms(kEchoTimeoutMs);
  }
  void set_timeout_ms(int ms) const {
    timeval timeout{ms / 1000, (ms % 1000) * 1000};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  bool send(const std::string& data) const {
    return ::sendto(fd.get(), data.data(), data.size(), 0,
                    reinterpret_cast<const sockaddr*>(&server),
                    server_length) == static_cast<ssize_t>(data.size());
  }
  /// The next datagram, or nothing within the timeout.
  std::optional<std::string> receive() const {
    std::string buffer(70000, '\0');
    const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), 0);
    if (n < 0) return std::nullopt;
    buffer.resize(static_cast<size_t>(n));
    return buffer;
  }
  /// "" when `data` comes back unchanged.
  std::string round_trip(const std::string& data) const {
    if (!send(data)) return "send of " + std::to_string(data.size()) + " bytes failed";
    auto echo = receive();
    if (!echo) return "no echo of " + std::to_string(data.size()) + " bytes within 10 s";
    if (*echo != data) return "the echo of " + std::to_string(data.size()) + " bytes differs";
    return "";
  }
};

class UdpEchoProcess : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }
  std::vector<std::string> overrides(std::vector<std::string> more = {}) const {
    std::vector<std::string> all = {"server.protocol=udp_echo", "event_loop.backend=" + GetParam()};
    all.insert(all.end(), more.begin(), more.end());
    return all;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, UdpEchoProcess, kBackendNames,
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

TEST_P(UdpEchoProcess, EchoesDatagramsFromZeroTo65507BytesUnchanged) {
  ServerProcess server(overrides());
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("(udp)"), 1u) << server.output_tail();
  UdpClient client(AF_INET, server.port());
  std::vector<size_t> sizes = {0, 1, 2, 255, 256, 1472, 1473, 4096, 9000, 65000, kMaxIpv4Payload};
  for (size_t size = 3; size < kMaxIpv4Payload; size += 977) sizes.push_back(size);
  for (size_t size : sizes) {
    ASSERT_EQ(client.round_trip(datagram_of(size)), "") << server.output_tail();
  }
  // A second sender is answered at its own address.
  UdpClient other(AF_INET, server.port());
  EXPECT_EQ(other.round_trip("from another port"), "");
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST_P(UdpEchoProcess, EchoesOverIpv6) {
  UniqueFd probe(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  if (!probe ||
      ::bind(probe.get(), reinterpret_cast<const sockaddr*>(&loopback), sizeof loopback) != 0) {
    GTEST_SKIP() << "this host has no IPv6 loopback (::1)";
  }
  ServerProcess server(overrides({"server.ip=::1"}));
  UCP_START_SERVER(server);
  UdpClient client(AF_INET6, server.port());
  for (size_t size : {size_t{0}, size_t{1}, size_t{1232}, kMaxIpv4Payload, size_t{65527}}) {
    EXPECT_EQ(client.round_trip(datagram_of(size)), "");
  }
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

// Two workers share the port (SO_REUSEPORT); a flood from several senders may lose datagrams
// (UDP under overload), counted here, but every echo is whole, and the server answers after.
// Memory is bounded: the first flood may touch every loop buffer once; two more add nothing
// beyond noise.
TEST_P(UdpEchoProcess, FloodFromManySendersLosesOnlyWholeDatagrams) {
  ServerProcess server(overrides({"server.thread_num=2"}));
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("2 worker(s), one UDP socket each (SO_REUSEPORT)"), 1u)
      << server.output_tail();
  std::vector<std::unique_ptr<UdpClient>> senders;
  for (int i = 0; i < 8; ++i)
    senders.push_back(std::make_unique<UdpClient>(AF_INET, server.port()));
  constexpr size_t kPerSender = 3000;
  constexpr int kFloods = 3;
  int64_t rss_after_first_kb = 0;
  for (int round = 0; round < kFloods; ++round) {
    for (size_t n = 0; n < kPerSender; ++n) {
      for (auto& sender : senders) ASSERT_TRUE(sender->send(datagram_of(16 + n % 1400)));
    }
    size_t echoed = 0, corrupted = 0;
    for (auto& sender : senders) {
      sender->set_timeout_ms(300);
      while (auto echo = sender->receive()) {
        if (echo->size() < 16 || *echo != datagram_of(echo->size())) {
          ++corrupted;
        } else {
          ++echoed;
        }
      }
    }
    const size_t sent = kPerSender * senders.size();
    std::printf("flood %d through proactor_test: %zu sent, %zu echoed, %zu lost, RSS %lld KiB\n",
                round + 1, sent, echoed, sent - echoed, static_cast<long long>(server.rss_kb()));
    EXPECT_EQ(corrupted, 0u);
    EXPECT_GT(echoed, 0u);
    if (round == 0) rss_after_first_kb = server.rss_kb();
  }
  const int64_t growth_kb = server.rss_kb() - rss_after_first_kb;
  ::testing::Test::RecordProperty("rss_growth_after_first_flood_kb", std::to_string(growth_kb));
#ifndef UCP_SANITIZER_BUILD  // ASan's quarantine holds freed blocks back on purpose
  EXPECT_LT(growth_kb, 16 * 1024) << "RSS grew by " << growth_kb << " KiB over " << kFloods - 1
                                  << " more floods";
#endif
  // Echoes of the last flood may still be on their way (the server can fall behind by more
  // than the 300 ms of silence above): they are whole and smaller, and are passed over. While
  // they fill the sender's receive queue the kernel may drop the large echo (UDP), so the
  // datagram goes again, three times at most.
  senders.front()->set_timeout_ms(kEchoTimeoutMs);
  const std::string last = datagram_of(kMaxIpv4Payload);
  std::optional<std::string> echo;
  size_t late = 0;
  for (int attempt = 0; attempt < 3 && !(echo && *echo == last); ++attempt) {
    ASSERT_TRUE(senders.front()->send(last));
    while ((echo = senders.front()->receive()) && *echo != last) {
      EXPECT_EQ(*echo, datagram_of(echo->size())) << "a late echo of the flood is corrupted";
      ASSERT_LT(++late, kPerSender * kFloods) << "more late echoes than the floods sent";
    }
  }
  EXPECT_TRUE(echo) << "no echo of " << last.size() << " bytes after the floods";
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

// The receive buffer asked for is what the socket got, or one WARN names both figures (the
// kernel caps SO_RCVBUF at net.core.rmem_max for an unprivileged process).
TEST_P(UdpEchoProcess, ReceiveBufferIsAsAskedOrOneWarningSaysWhatTheKernelGave) {
  constexpr uint32_t kAsked = 16 << 20;
  ServerProcess server(overrides({"server.udp_recv_buffer_bytes=" + std::to_string(kAsked)}));
  UCP_START_SERVER(server);
  const size_t exact = server.count_output_lines("SO_RCVBUF " + std::to_string(kAsked) + " bytes");
  const size_t warned =
      server.count_output_lines("server.udp_recv_buffer_bytes: asked for " +
                                std::to_string(kAsked) + " bytes, the kernel gave");
  EXPECT_EQ(exact + warned, 1u) << server.output_tail();
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

// server.udp_metrics_port: every echo is counted both ways, bytes exactly, and the scrape is
// valid Prometheus text.
TEST_P(UdpEchoProcess, MetricsPortCountsEveryDatagramEachWay) {
  const uint16_t metrics_port = free_loopback_port();
  ServerProcess server(overrides({"server.udp_metrics_port=" + std::to_string(metrics_port)}));
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("/metrics on 127.0.0.1:" + std::to_string(metrics_port)), 1u)
      << server.output_tail();
  UdpClient client(AF_INET, server.port());
  size_t bytes = 0;
  for (size_t size : {size_t{0}, size_t{1}, size_t{1472}, size_t{9000}, kMaxIpv4Payload}) {
    ASSERT_EQ(client.round_trip(datagram_of(size)), "") << server.output_tail();
    bytes += size;
  }
  auto reply = http_exchange(
      metrics_port, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10000);
  ASSERT_TRUE(reply) << reply.error().message();
  ASSERT_EQ(reply->status, 200);
  const std::string& text = reply->body;
  EXPECT_NE(text.find("\nucp_udp_datagrams_received_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nucp_udp_datagrams_sent_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nucp_udp_bytes_received_total " + std::to_string(bytes) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nucp_udp_bytes_sent_total " + std::to_string(bytes) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nucp_udp_send_errors_total 0\n"), std::string::npos);
  EXPECT_NE(text.find("\nprocess_open_fds "), std::string::npos);
  if (promtool_installed()) {
    const auto [code, said] = promtool(text);
    EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << text;
  }
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

// A metrics port someone else listens on: the server does not start, and says which key.
TEST_P(UdpEchoProcess, TakenMetricsPortIsAStartUpFailureNamingTheKey) {
  UniqueFd taken(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(taken.get(), 1), 0);
  ASSERT_EQ(::getsockname(taken.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  ServerProcess server(overrides({"server.udp_metrics_port=" + port}));
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built";
  ASSERT_TRUE(server.launch()) << server.error();
  const auto status = server.wait_exit(30000);
  ASSERT_TRUE(status) << server.output_tail();
  EXPECT_EQ(status->describe(), "exit 1") << server.output_tail();
  EXPECT_GE(server.count_output_lines("127.0.0.1:" + port +
                                      " for /metrics: address already in use; stop the other "
                                      "server or choose another server.udp_metrics_port"),
            1u)
      << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
