// UpstreamGroup: one worker's picks. Round robin gives each server exactly its weight per cycle,
// least_conn follows the active counts, hash sticks a client to a server and moves only the
// clients of a server that becomes unavailable; passive ejection and new snapshots keep state.

#include "ucp/proxy/UpstreamGroup.h"

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/proxy/Upstreams.h"

#include "LoopRunner.h"

namespace ucp::proxy {
namespace {

using namespace std::chrono_literals;

InetAddress address(const std::string& ip, uint16_t port) { return *InetAddress::parse(ip, port); }

std::shared_ptr<const GroupSnapshot> snapshot(Balance balance, std::vector<uint32_t> weights,
                                              uint32_t max_fails = 3) {
  auto options = std::make_shared<UpstreamGroupOptions>();
  options->name = "g";
  options->balance = balance;
  options->max_fails = max_fails;
  options->fail_timeout_ms = 10000;
  auto s = std::make_shared<GroupSnapshot>();
  std::vector<std::string> names;
  for (size_t i = 0; i < weights.size(); ++i) {
    options->servers.push_back({"10.0.0." + std::to_string(i + 1), 80, weights[i]});
    UpstreamPeer peer;
    peer.address = address("10.0.0." + std::to_string(i + 1), 80);
    peer.name = peer.host = peer.address.to_string();
    peer.weight = weights[i];
    names.push_back(peer.name);
    s->peers.push_back(peer);
  }
  s->options = options;
  s->down.assign(weights.size(), 0);
  s->ejected_until.assign(weights.size(), Clock::time_point{});
  s->maglev = std::make_shared<const MaglevTable>(MaglevTable::build(names, weights));
  return s;
}

class UpstreamGroupTest : public ::testing::Test {
 protected:
  std::unique_ptr<EventLoop> loop = test::make_loop();
  Upstreams upstreams;  // never started: ejections reported to it go nowhere
  WorkerUpstreams view{upstreams, *loop};
  GroupRef group{std::make_unique<UpstreamGroup>(view, "g").release()};
  const InetAddress client = address("192.0.2.1", 5000);
  const Clock::time_point now = Clock::now();

  std::map<std::string, int> count_picks(int n, bool keep = false) {
    std::map<std::string, int> counts;
    std::vector<PeerLease> kept;
    for (int i = 0; i < n; ++i) {
      PeerLease peer = group->pick(client, {}, now);
      EXPECT_TRUE(peer);
      if (!peer) break;
      ++counts[peer->name()];
      if (keep) kept.push_back(std::move(peer));
    }
    return counts;
  }
};

TEST_F(UpstreamGroupTest, RoundRobinGivesEachServerItsWeightInterleaved) {
  group->install(snapshot(Balance::kRoundRobin, {5, 1, 1}));
  std::string order;
  for (int i = 0; i < 7; ++i) order += group->pick(client, {}, now)->name()[7];
  EXPECT_EQ(order, "1121311");  // smooth: a a b a c a a, not a a a a a b c
  auto counts = count_picks(700);
  EXPECT_EQ(counts["10.0.0.1:80"], 500);
  EXPECT_EQ(counts["10.0.0.2:80"], 100);
  EXPECT_EQ(counts["10.0.0.3:80"], 100);
}

TEST_F(UpstreamGroupTest, RoundRobinSkipsTriedAndEjectedServers) {
  group->install(snapshot(Balance::kRoundRobin, {1, 1, 1}));
  const std::array<InetAddress, 2> tried = {address("10.0.0.1", 80), address("10.0.0.2", 80)};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(group->pick(client, tried, now)->name(), "10.0.0.3:80");
  // Three failures in a row eject 10.0.0.3 on this worker at once.
  PeerLease third = group->pick(client, tried, now);
  for (int i = 0; i < 3; ++i) group->report_failure(*third, now);
  EXPECT_FALSE(group->pick(client, tried, now));
  EXPECT_EQ(group->available_count(now), 2u);
  EXPECT_EQ(group->available_count(now + 10001ms), 3u);  // fail_timeout_ms later it is back
  // On probation: the next failure ejects it again at once; a success clears it.
  group->report_failure(*third, now + 10001ms);
  EXPECT_EQ(group->available_count(now + 10002ms), 2u);
  group->report_success(*third, 1ms);
  EXPECT_EQ(group->available_count(now + 10002ms), 3u);
  EXPECT_EQ(third->consecutive_failures(), 0u);
}

TEST_F(UpstreamGroupTest, LeastConnFollowsActiveConnectionsPerWeight) {
  group->install(snapshot(Balance::kLeastConn, {1, 2, 1}));
  // Held connections: the weight-2 server takes twice as many as each other.
  auto counts = count_picks(400, /*keep=*/true);
  EXPECT_EQ(counts["10.0.0.1:80"], 100);
  EXPECT_EQ(counts["10.0.0.2:80"], 200);
  EXPECT_EQ(counts["10.0.0.3:80"], 100);
  // One server busy with held connections: the next ones go to the others.
  std::vector<PeerLease> busy;
  for (int i = 0; i < 3; ++i) busy.push_back(group->pick(client, {}, now));
  std::map<std::string, int> next;
  for (int i = 0; i < 4; ++i) {
    PeerLease p = group->pick(client, {}, now);
    ++next[p->name()];
    busy.push_back(std::move(p));
  }
  for (const auto& [name, n] : next) EXPECT_LE(n, 2) << name;
  EXPECT_EQ(group->peer(0).active + group->peer(1).active + group->peer(2).active, 7u);
  busy.clear();
  EXPECT_EQ(group->peer(0).active + group->peer(1).active + group->peer(2).active, 0u);
}

TEST_F(UpstreamGroupTest, HashSticksAClientAndMovesOnlyAnUnavailableServersClients) {
  group->install(snapshot(Balance::kHash, {1, 1, 1, 1}));
  std::map<int, std::string> first;
  std::map<std::string, int> spread;
  for (int c = 0; c < 400; ++c) {
    const InetAddress from = address("198.51.100." + std::to_string(c % 250), uint16_t(1000 + c));
    const std::string server = group->pick(from, {}, now)->name();
    first[c] = server;
    ++spread[server];
    // Another connection from the same IP (another port) goes to the same server.
    EXPECT_EQ(group->pick(address("198.51.100." + std::to_string(c % 250), 9), {}, now)->name(),
              server);
  }
  EXPECT_EQ(spread.size(), 4u);
  // 10.0.0.2 ejected: its clients move, every other client stays.
  PeerLease second;
  for (size_t i = 0; i < group->size(); ++i) {
    if (group->peer(i).name() == "10.0.0.2:80") {
      second = PeerLease(const_cast<PeerState&>(group->peer(i)));
    }
  }
  for (int i = 0; i < 3; ++i) group->report_failure(*second, now);
  for (int c = 0; c < 400; ++c) {
    const InetAddress from = address("198.51.100." + std::to_string(c % 250), uint16_t(1000 + c));
    const std::string server = group->pick(from, {}, now)->name();
    if (first[c] == "10.0.0.2:80") {
      EXPECT_NE(server, "10.0.0.2:80");
    } else {
      EXPECT_EQ(server, first[c]) << "client " << c << " moved though its server is up";
    }
  }
}

TEST_F(UpstreamGroupTest, DownServersAreSkippedAndNoneAvailableGivesNothing) {
  auto s = std::const_pointer_cast<GroupSnapshot>(snapshot(Balance::kRoundRobin, {1, 1}));
  s->down[0] = 1;
  group->install(s);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(group->pick(client, {}, now)->name(), "10.0.0.2:80");
  auto all_down = std::const_pointer_cast<GroupSnapshot>(snapshot(Balance::kRoundRobin, {1, 1}));
  all_down->down.assign(2, 1);
  group->install(all_down);
  EXPECT_FALSE(group->pick(client, {}, now));
  auto ejected = std::const_pointer_cast<GroupSnapshot>(snapshot(Balance::kRoundRobin, {1, 1}));
  ejected->ejected_until.assign(2, now + 1s);  // ejected by another worker
  group->install(ejected);
  EXPECT_FALSE(group->pick(client, {}, now));
  EXPECT_TRUE(group->pick(client, {}, now + 2s));
}

TEST_F(UpstreamGroupTest, NewSnapshotKeepsTheStateOfAddressesThatStay) {
  group->install(snapshot(Balance::kLeastConn, {1, 1, 1}));
  PeerLease held = group->pick(client, {}, now);
  const std::string name = held->name();
  // The held server leaves the group: its state lives on with the lease.
  auto fewer = std::make_shared<GroupSnapshot>(*snapshot(Balance::kLeastConn, {1, 1, 1}));
  for (size_t i = 0; i < fewer->peers.size(); ++i) {
    if (fewer->peers[i].name == name) {
      fewer->peers.erase(fewer->peers.begin() + static_cast<long>(i));
      fewer->down.pop_back();
      fewer->ejected_until.pop_back();
      break;
    }
  }
  PeerLease other = group->pick(client, {}, now);
  const std::string other_name = other->name();
  group->install(fewer);
  EXPECT_EQ(group->size(), 2u);
  EXPECT_EQ(held->active, 1u);
  EXPECT_EQ(held->name(), name);
  held.reset();  // frees the retired server's state (ASan would see a leak or a double free)
  for (size_t i = 0; i < group->size(); ++i) {
    if (group->peer(i).name() == other_name) {
      EXPECT_EQ(group->peer(i).active, 1u);
    }
  }
}

}  // namespace
}  // namespace ucp::proxy
