#pragma once
// The three balancing rules, over one worker's view of a group's servers. Each picks among the
// servers `available(i)` allows (not ejected, not failing checks, not yet tried for this
// client) and returns the index, or -1 when none is left.
//
// - round robin: nginx's smooth weighted round robin. Each pick adds every candidate's weight to
//   its current weight, takes the largest, and takes the candidates' total off the winner. Over
//   any run of sum(weights) picks each server gets exactly its weight, interleaved (weights 5,1,1
//   give a a b a c a a, not a a a a a b c).
// - least_conn: the fewest active connections per unit of weight (a.active * b.weight <
//   b.active * a.weight, no division); ties go round robin among the tied servers.
// - hash: the Maglev slot of the client's hash; when that server is unavailable, the next key
//   (MaglevTable::next) is looked up, up to kHashProbes times, then the first available server
//   after the hash's position. Only the clients of an unavailable server move.
//
// Peers is a random-access range of pointers to objects with `uint32_t weight`, `uint32_t
// active` and `int64_t current_weight` (BalancerPeer). The state is one worker's: no atomics.
//
// Thread contract: single-threaded (a worker's own copy).

#include <cstddef>
#include <cstdint>

#include "ucp/proxy/MaglevTable.h"

namespace ucp::proxy {

/// What the balancer keeps per server, per worker.
struct BalancerPeer {
  uint32_t weight = 1;
  uint32_t active = 0;         // connections through this server on this worker (least_conn)
  int64_t current_weight = 0;  // smooth round robin
};

inline constexpr int kHashProbes = 32;

template <class Peers, class Available>
int32_t pick_round_robin(const Peers& peers, Available&& available) {
  int32_t best = -1;
  int64_t total = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!available(i)) continue;
    auto& peer = *peers[i];
    peer.current_weight += peer.weight;
    total += peer.weight;
    if (best < 0 || peer.current_weight > peers[static_cast<size_t>(best)]->current_weight) {
      best = static_cast<int32_t>(i);
    }
  }
  if (best >= 0) peers[static_cast<size_t>(best)]->current_weight -= total;
  return best;
}

template <class Peers, class Available>
int32_t pick_least_conn(const Peers& peers, Available&& available) {
  // First pass: the lowest load; second: smooth round robin among the servers that have it.
  int32_t least = -1;
  size_t tied = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!available(i)) continue;
    const auto& peer = *peers[i];
    if (least >= 0) {
      const auto& best = *peers[static_cast<size_t>(least)];
      const uint64_t mine = uint64_t{peer.active} * best.weight;
      const uint64_t theirs = uint64_t{best.active} * peer.weight;
      if (mine > theirs) continue;
      if (mine == theirs) {
        ++tied;
        continue;
      }
    }
    least = static_cast<int32_t>(i);
    tied = 1;
  }
  if (least < 0 || tied == 1) return least;
  const auto& best = *peers[static_cast<size_t>(least)];
  return pick_round_robin(peers, [&](size_t i) {
    if (!available(i)) return false;
    const auto& peer = *peers[i];
    return uint64_t{peer.active} * best.weight == uint64_t{best.active} * peer.weight;
  });
}

template <class Available>
int32_t pick_hash(const MaglevTable& table, size_t count, uint64_t hash, Available&& available) {
  if (table.empty() || count == 0) return -1;
  uint64_t key = hash;
  for (int probe = 0; probe < kHashProbes; ++probe) {
    const uint32_t i = table.lookup(key);
    if (i < count && available(size_t{i})) return static_cast<int32_t>(i);
    key = MaglevTable::next(key);
  }
  // Most servers are out: a deterministic scan from the hash's position.
  for (size_t step = 0; step < count; ++step) {
    const size_t i = (hash + step) % count;
    if (available(i)) return static_cast<int32_t>(i);
  }
  return -1;
}

}  // namespace ucp::proxy
