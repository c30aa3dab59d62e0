// connect_upstream(): retries on another server after a refused connect, never more than
// connect_tries servers, kNoServer when nothing is available, and a failure of this process
// (out of fds) returned at once without counting against any server.

#include "ucp/proxy/UpstreamConnector.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "ucp/net/Socket.h"
#include "ucp/proxy/Upstreams.h"

#include "LoopRunner.h"

namespace ucp::proxy {
namespace {

InetAddress loopback(uint16_t port) { return *InetAddress::parse("127.0.0.1", port); }

/// A loopback port nothing listens on.
uint16_t closed_port() {
  auto probe = listen_on(loopback(0), {});
  return InetAddress::local_of(probe->get())->port();
}

class UpstreamConnectorTest : public ::testing::Test {
 protected:
  std::unique_ptr<EventLoop> loop = test::make_loop();
  Upstreams upstreams;  // not started: ejections reported to it go nowhere
  WorkerUpstreams view{upstreams, *loop};
  GroupRef group{std::make_unique<UpstreamGroup>(view, "g").release()};
  std::optional<UniqueFd> listener;

  void install(std::vector<uint16_t> ports, uint32_t tries = 3, uint32_t max_fails = 5) {
    auto options = std::make_shared<UpstreamGroupOptions>();
    options->name = "g";
    options->connect_tries = tries;
    options->max_fails = max_fails;
    options->connect_timeout_ms = 2000;
    auto snapshot = std::make_shared<GroupSnapshot>();
    for (uint16_t port : ports) {
      options->servers.push_back({"127.0.0.1", port, 1});
      UpstreamPeer peer;
      peer.address = loopback(port);
      peer.name = peer.host = peer.address.to_string();
      snapshot->peers.push_back(peer);
    }
    snapshot->options = options;
    snapshot->down.assign(ports.size(), 0);
    snapshot->ejected_until.assign(ports.size(), Clock::time_point{});
    group->install(snapshot);
  }
  uint16_t listening_port() {
    listener = std::move(*listen_on(loopback(0), {}));
    return InetAddress::local_of(listener->get())->port();
  }
  Result<UpstreamConnection> connect() {
    Result<UpstreamConnection> out = Unexpected{std::errc::invalid_argument};
    auto body = [&]() -> Task<> {
      out = co_await connect_upstream(*loop, group, loopback(1));
      if (out) co_await out->connection->close();
    };
    test::run_to_end(*loop, body());
    return out;
  }
  uint64_t failures() const {
    uint64_t n = 0;
    for (size_t i = 0; i < group->size(); ++i) n += group->peer(i).connect_failures();
    return n;
  }
};

TEST_F(UpstreamConnectorTest, ARefusedConnectMovesOnToTheNextServer) {
  install({closed_port(), listening_port()});
  auto connected = connect();
  ASSERT_TRUE(connected) << connected.error().message();
  EXPECT_EQ(connected->attempts, 2u);
  EXPECT_EQ(failures(), 1u);
}

TEST_F(UpstreamConnectorTest, TriesAtMostConnectTriesServers) {
  install({closed_port(), closed_port(), closed_port()}, /*tries=*/2);
  auto connected = connect();
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error(), std::errc::connection_refused);
  EXPECT_EQ(failures(), 2u);
}

TEST_F(UpstreamConnectorTest, NothingAvailableIsNoServer) {
  install({closed_port()}, 3, /*max_fails=*/1);
  (void)connect();  // ejects it
  auto connected = connect();
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error(), ProxyErrc::kNoServer);
  EXPECT_EQ(failures(), 1u);
}

TEST_F(UpstreamConnectorTest, RunningOutOfFdsCountsAgainstNoServer) {
  install({listening_port(), listening_port()}, 3, /*max_fails=*/1);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // No fd left for a socket: the limit just above the highest fd open, the numbers below it
  // that are free taken.
  int highest = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) highest = fd;
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(highest) + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<UniqueFd> filler;  // the free numbers below the limit
  for (UniqueFd fd(::dup(0)); fd; fd = UniqueFd(::dup(0))) filler.push_back(std::move(fd));
  Result<UpstreamConnection> connected = Unexpected{std::errc::invalid_argument};
  auto body = [&]() -> Task<> { connected = co_await connect_upstream(*loop, group, loopback(1)); };
  test::run_to_end(*loop, body());
  filler.clear();
  ::setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error(), std::errc::too_many_files_open);
  EXPECT_EQ(failures(), 0u);  // neither server was blamed, and neither is ejected
  EXPECT_EQ(group->available_count(Clock::now()), 2u);
}

}  // namespace
}  // namespace ucp::proxy
