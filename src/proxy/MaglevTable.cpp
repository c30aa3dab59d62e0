#include "ucp/proxy/MaglevTable.h"

#include <algorithm>

namespace ucp::proxy {
namespace {

uint64_t finalize(uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// Primes for M: the smallest one with at least 100 slots per server is used (the paper's
// rule of thumb for a spread within a few percent of each share).
constexpr uint32_t kSizes[] = {251,   509,    1021,   2039,   4093,    8191,    16381,   32749,
                               65521, 131071, 262139, 524287, 1048573, 2097143, 4194301, 6553577};

uint32_t table_size(size_t servers) noexcept {
  for (uint32_t size : kSizes) {
    if (size >= servers * 100) return size;
  }
  return kSizes[std::size(kSizes) - 1];
}

std::span<const std::byte> bytes_of(const std::string& s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace

uint64_t hash_bytes(std::span<const std::byte> bytes, uint64_t seed) noexcept {
  uint64_t h = 0xcbf29ce484222325ULL ^ finalize(seed + 0x9e3779b97f4a7c15ULL);
  for (std::byte b : bytes) {
    h ^= static_cast<uint8_t>(b);
    h *= 0x100000001b3ULL;
  }
  return finalize(h);
}

uint64_t MaglevTable::next(uint64_t hash) noexcept {
  return finalize(hash + 0x9e3779b97f4a7c15ULL);
}

MaglevTable MaglevTable::build(std::span<const std::string> names,
                               std::span<const uint32_t> weights) {
  MaglevTable table;
  const size_t n = std::min({names.size(), weights.size(), size_t{kMaxServers}});
  if (n == 0) return table;
  const uint32_t m = table_size(n);
  std::vector<uint32_t> offset(n), skip(n), next(n, 0);
  uint32_t max_weight = 1;
  for (size_t i = 0; i < n; ++i) {
    offset[i] = static_cast<uint32_t>(hash_bytes(bytes_of(names[i]), 1) % m);
    skip[i] = static_cast<uint32_t>(hash_bytes(bytes_of(names[i]), 2) % (m - 1) + 1);
    max_weight = std::max(max_weight, std::max<uint32_t>(weights[i], 1));
  }
  // Weighted turns: per round the heaviest server takes one slot and the others a share in
  // proportion to their weight (credit carried over), so every server fills its slots evenly
  // across the table's filling, not in one burst.
  std::vector<uint64_t> credit(n, 0);
  std::vector<int32_t> owner(m, -1);
  uint32_t filled = 0;
  while (filled < m) {
    for (size_t i = 0; i < n && filled < m; ++i) {
      credit[i] += std::max<uint32_t>(weights[i], 1);
      if (credit[i] < max_weight) continue;
      credit[i] -= max_weight;
      uint32_t slot;
      do {
        slot = static_cast<uint32_t>((offset[i] + uint64_t{next[i]} * skip[i]) % m);
        ++next[i];
      } while (owner[slot] >= 0);
      owner[slot] = static_cast<int32_t>(i);
      ++filled;
    }
  }
  table.slots_.assign(owner.begin(), owner.end());
  return table;
}

}  // namespace ucp::proxy
