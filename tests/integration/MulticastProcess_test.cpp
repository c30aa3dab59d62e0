// UDP multicast across processes over loopback: a feed sent by this test reaches two
// bin/example_market_data receivers, each another process, which both see every message and
// the same gap and late copy; bin/proactor_test's udp_echo joins server.udp_multicast_group and
// answers each of the group's datagrams once, on both backends; what cannot work is refused.
// The sender is a plain socket, so the check does not depend on the code under test.

#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "BackendProbe.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

// A plain socket that sends to IPv4 groups out of lo, from 127.0.0.1.
class FeedSender {
 public:
  FeedSender() {
    fd_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ip_mreqn request{};
    request.imr_ifindex = static_cast<int>(::if_nametoindex("lo"));
    request.imr_address.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::setsockopt(fd_.get(), IPPROTO_IP, IP_MULTICAST_IF, &request, sizeof request), 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
    timeval timeout{10, 0};  // a lost echo fails the test after this long
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  void send_to(const char* ip, uint16_t port, const std::string& bytes) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, ip, &to.sin_addr);
    ASSERT_EQ(::sendto(fd_.get(), bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to),
                       sizeof to),
              static_cast<ssize_t>(bytes.size()))
        << std::strerror(errno);
  }
  /// The message of sequence number `sequence`: 8 bytes big-endian, then a text.
  void send_message(const char* group, uint16_t port, uint64_t sequence) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[7 - i] = static_cast<char>((sequence >> (8 * i)) & 0xFF);
    send_to(group, port, bytes + "px=101.25 qty=300");
  }
  std::string receive() {
    char buffer[2048];
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
    return n < 0 ? std::string("(nothing: ") + std::strerror(errno) + ")"
                 : std::string(buffer, static_cast<size_t>(n));
  }

 private:
  UniqueFd fd_;
};

// A UDP port free on every address right now (the receivers bind it with SO_REUSEPORT).
uint16_t free_udp_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  socklen_t length = sizeof any;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof any);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&any), &length);
  return ntohs(any.sin_port);
}

ServerProcess::Options receiver(uint16_t port, const std::string& group) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/example_market_data";
  options.command_line = {
      "--set", "feed.group=" + group,      "--set", "feed.port=" + std::to_string(port),
      "--set", "feed.interface=127.0.0.1", "--set", "feed.report_interval_ms=20",
      "--set", "log.flush_interval_ms=20"};
  return options;
}

TEST(MulticastProcess, TwoReceiversInOtherProcessesSeeEveryMessageAndTheSameGap) {
  const uint16_t port = free_udp_port();
  ServerProcess first(receiver(port, "239.255.51.1"));
  ServerProcess second(receiver(port, "239.255.51.1"));
  UCP_START_SERVER(first);
  UCP_START_SERVER(second);
  FeedSender feed;
  // 1..60 without 21..23 (a gap of three), then 30 again (a late copy).
  for (uint64_t sequence = 1; sequence <= 60; ++sequence) {
    if (sequence < 21 || sequence > 23) feed.send_message("239.255.51.1", port, sequence);
  }
  feed.send_message("239.255.51.1", port, 30);
  for (ServerProcess* process : {&first, &second}) {
    EXPECT_TRUE(
        process->wait_for_output("received=58 gaps=1 missing=3 late=1 malformed=0 next=61", 30000))
        << process->output_tail();
    EXPECT_EQ(process->count_output_lines("gap: 3 message(s) missing (21..23)"), 1u)
        << process->output_tail();
  }
  EXPECT_EQ(first.stop(SIGTERM).describe(), "exit 0") << first.output_tail();
  EXPECT_EQ(second.stop(SIGTERM).describe(), "exit 0") << second.output_tail();
}

TEST(MulticastProcess, AReceiverOfAnotherGroupOnThePortHearsNothingOfIt) {
  const uint16_t port = free_udp_port();
  ServerProcess member(receiver(port, "239.255.52.1"));
  ServerProcess other(receiver(port, "239.255.52.2"));
  UCP_START_SERVER(member);
  UCP_START_SERVER(other);
  FeedSender feed;
  for (uint64_t sequence = 1; sequence <= 10; ++sequence) {
    feed.send_message("239.255.52.1", port, sequence);
  }
  feed.send_message("239.255.52.2", port, 1000);  // the other group's one message, sent last
  EXPECT_TRUE(member.wait_for_output("received=10 gaps=0", 30000)) << member.output_tail();
  EXPECT_TRUE(
      other.wait_for_output("received=1 gaps=0 missing=0 late=0 malformed=0 next=1001", 30000))
      << other.output_tail();
  EXPECT_EQ(member.stop(SIGTERM).describe(), "exit 0") << member.output_tail();
  EXPECT_EQ(other.stop(SIGTERM).describe(), "exit 0") << other.output_tail();
}

class UdpEchoMulticast : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }
};

TEST_P(UdpEchoMulticast, AnswersEachDatagramOfTheGroupOnce) {
  ServerProcess server({"event_loop.backend=" + GetParam(), "server.protocol=udp_echo",
                        "server.ip=0.0.0.0", "server.thread_num=2",
                        "server.udp_multicast_group=239.255.53.1",
                        "server.udp_multicast_interface=127.0.0.1"});
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("worker 0 in multicast group 239.255.53.1 on 127.0.0.1"), 1u)
      << server.output_tail();
  FeedSender client;
  for (int i = 0; i < 5; ++i) {
    client.send_to("239.255.53.1", server.port(), "quote " + std::to_string(i));
    EXPECT_EQ(client.receive(), "quote " + std::to_string(i));
  }
  // Unicast to the port reaches one of the two sockets; were the group's datagrams answered
  // twice, a second copy of the last would come before this answer.
  client.send_to("127.0.0.1", server.port(), "marker");
  EXPECT_EQ(client.receive(), "marker");
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

INSTANTIATE_TEST_SUITE_P(Backends, UdpEchoMulticast, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

// Starts proactor_test with `overrides` and expects it to refuse them: exit `code`, a line
// holding `says`.
void expect_refused(const std::vector<std::string>& overrides, int code, const std::string& says) {
  ServerProcess server(overrides);
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built";
  ASSERT_TRUE(server.launch()) << server.error();
  const auto status = server.wait_exit(30000);
  ASSERT_TRUE(status) << server.output_tail();
  EXPECT_EQ(status->describe(), "exit " + std::to_string(code)) << server.output_tail();
  EXPECT_EQ(server.count_output_lines(says), 1u) << server.output_tail();
}

TEST(UdpEchoMulticastConfig, RefusesWhatCannotWork) {
  expect_refused({"server.protocol=udp_echo", "server.udp_multicast_group=10.1.2.3"}, 2,
                 "server.udp_multicast_group: \"10.1.2.3\" is not a multicast address");
  expect_refused({"server.protocol=udp_echo", "server.udp_multicast_group=239.255.54.1",
                  "server.udp_multicast_interface=no-such-if0"},
                 2, "\"no-such-if0\" is neither an address of this host nor an interface name");
  expect_refused({"server.protocol=udp_echo", "server.ip=127.0.0.1",
                  "server.udp_multicast_group=239.255.54.1"},
                 2, "server.ip must be 0.0.0.0 (or the group itself)");
  expect_refused({"server.protocol=udp_echo", "server.ip=0.0.0.0",
                  "server.udp_multicast_group=ff15::5401", "server.udp_multicast_interface=lo"},
                 2, "server.ip must be :: (or the group itself)");
}

}  // namespace
}  // namespace ucp::test
