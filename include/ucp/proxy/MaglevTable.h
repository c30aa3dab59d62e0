#pragma once
// MaglevTable: consistent hashing for the `hash` balance (Maglev, Eisenbud et al., NSDI 2016).
// A lookup table of M slots (M prime, at least 100 per server) in which each server owns a share
// of slots proportional to its weight; a client's hash picks a slot, and the slot its server.
//
//   auto table = MaglevTable::build(names, weights);   // once per change of the server set
//   uint32_t server = table.lookup(hash_bytes(client_ip));
//
// Why Maglev rather than a ring with virtual nodes: O(1) lookups from one small array, and an
// even spread (each server within a few percent of its share) without hundreds of virtual nodes
// per server. Disruption stays small: each server fills its slots from its own permutation of
// the table, keyed by its name alone, so removing one server moves its slots and few others
// (MaglevTable_test measures it). A server that is only ejected or failing its checks keeps its
// slots: the balancer looks again with a rehashed key (next()), so the clients of every other
// server stay where they are.
//
// Thread contract: built on one thread, then immutable: any thread may look up.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ucp::proxy {

/// A 64-bit hash of `bytes` (FNV-1a, then the murmur3 finaliser to spread the low bits).
uint64_t hash_bytes(std::span<const std::byte> bytes, uint64_t seed = 0) noexcept;

class MaglevTable {
 public:
  static constexpr uint32_t kMaxServers = 65535;

  MaglevTable() = default;
  /// `names[i]` identifies server i (the same name keeps the same permutation across
  /// rebuilds); `weights[i]` >= 1. At most kMaxServers; none gives an empty table.
  static MaglevTable build(std::span<const std::string> names, std::span<const uint32_t> weights);

  bool empty() const noexcept { return slots_.empty(); }
  /// M: the number of slots.
  size_t size() const noexcept { return slots_.size(); }
  /// The server that owns the slot of `hash`. Requires !empty().
  uint32_t lookup(uint64_t hash) const noexcept { return slots_[hash % slots_.size()]; }
  /// The key for the next look when the server lookup(hash) gave cannot take the connection.
  static uint64_t next(uint64_t hash) noexcept;

 private:
  std::vector<uint16_t> slots_;
};

}  // namespace ucp::proxy
