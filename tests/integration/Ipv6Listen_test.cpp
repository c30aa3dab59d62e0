// server.ip takes IPv6 addresses: bin/proactor_test listens on [::1] and serves a client that
// connects over IPv6 loopback. Skipped where the host has no IPv6 loopback.

#include <csignal>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

bool host_has_ipv6_loopback() {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
}

/// A non-blocking IPv6 loopback connection to `port` (LoopbackClient speaks IPv4 only).
Result<UniqueFd> connect_ipv6_loopback(uint16_t port) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Unexpected{last_error()};
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  address.sin6_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS) return Unexpected{last_error()};
  if (auto ready = wait_for(fd.get(), POLLOUT, Deadline(5000)); !ready) {
    return Unexpected{ready.error()};
  }
  int error = 0;
  socklen_t length = sizeof error;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) return Unexpected{error_from_errno(error)};
  return fd;
}

TEST(Ipv6Listen, ServerListensOnIpv6LoopbackAndEchoes) {
  ::signal(SIGPIPE, SIG_IGN);
  if (!host_has_ipv6_loopback()) GTEST_SKIP() << "this host has no IPv6 loopback (::1)";
  ServerProcess server({"server.ip=::1"});
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("listening on [::1]:" + std::to_string(server.port())), 1u)
      << server.output_tail();
  auto fd = connect_ipv6_loopback(server.port());
  ASSERT_TRUE(fd) << fd.error().message();
  const std::string message = "hello over IPv6";
  char echoed[64];
  auto done =
      echo_round_trip(fd->get(), std::span<const char>(message.data(), message.size()), echoed);
  EXPECT_TRUE(done) << done.error().message();
  // Only [::1] listens: an IPv4 client gets no answer there.
  EXPECT_FALSE(connect_loopback(server.port(), 1000));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
