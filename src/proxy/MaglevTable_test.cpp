// MaglevTable: each server gets its weight's share of the slots, lookups are stable, and a
// server leaving moves its own clients and few others.

#include "ucp/proxy/MaglevTable.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ucp::proxy {
namespace {

std::vector<std::string> names(int n, int skip = -1) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    if (i != skip) out.push_back("10.0.0." + std::to_string(i + 1) + ":80");
  }
  return out;
}

uint64_t key(uint32_t i) { return hash_bytes(std::as_bytes(std::span(&i, 1))); }

TEST(MaglevTable, SpreadsSlotsInProportionToWeights) {
  const auto servers = names(4);
  const std::vector<uint32_t> weights = {1, 1, 2, 4};
  const MaglevTable table = MaglevTable::build(servers, weights);
  ASSERT_FALSE(table.empty());
  EXPECT_GE(table.size(), 400u);
  std::map<uint32_t, int> owned;
  for (uint32_t k = 0; k < 80000; ++k) ++owned[table.lookup(key(k))];
  ASSERT_EQ(owned.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const double share = owned[i] / 80000.0;
    const double expected = weights[i] / 8.0;
    std::printf("server %u: %.3f of the keys (weight share %.3f)\n", i, share, expected);
    EXPECT_NEAR(share, expected, expected * 0.15) << "server " << i;
  }
}

TEST(MaglevTable, SameNamesGiveTheSameTable) {
  const auto servers = names(5);
  const std::vector<uint32_t> weights(5, 1);
  const MaglevTable a = MaglevTable::build(servers, weights);
  const MaglevTable b = MaglevTable::build(servers, weights);
  for (uint32_t k = 0; k < 10000; ++k) ASSERT_EQ(a.lookup(key(k)), b.lookup(key(k)));
}

TEST(MaglevTable, RemovingAServerMovesFewOtherKeys) {
  const int n = 10;
  const auto all = names(n);
  const MaglevTable before = MaglevTable::build(all, std::vector<uint32_t>(n, 1));
  const int gone = 3;
  const auto rest = names(n, gone);
  const MaglevTable after = MaglevTable::build(rest, std::vector<uint32_t>(n - 1, 1));
  int others = 0, moved = 0;
  for (uint32_t k = 0; k < 100000; ++k) {
    const std::string& was = all[before.lookup(key(k))];
    const std::string& now = rest[after.lookup(key(k))];
    if (was == all[gone]) continue;  // its clients must move
    ++others;
    moved += was != now;
  }
  const double fraction = static_cast<double>(moved) / others;
  std::printf("removing 1 of %d servers moved %.2f%% of the other servers' keys\n", n,
              fraction * 100);
  // A modulo hash would move about 90% of them; Maglev a few percent.
  EXPECT_LT(fraction, 0.05);
}

TEST(MaglevTable, EmptyWithoutServers) { EXPECT_TRUE(MaglevTable::build({}, {}).empty()); }

}  // namespace
}  // namespace ucp::proxy
