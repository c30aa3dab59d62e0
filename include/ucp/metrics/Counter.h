#pragma once
// Counter: a Prometheus counter (monotonic, rendered with a `_total` suffix), sharded per
// worker so that the hot path takes no lock and no locked instruction (Gauge.h alike).
//
// Each worker owns one shard (its index: the worker's number, 0 .. shards-1) and writes it
// with a relaxed load and store, which compile to plain moves; a scrape on any thread reads
// every shard relaxed and sums. Shards sit on their own cache lines, so two workers never
// share one.
//
//   metrics::Counter requests(workers);       // owned by the server, registered once:
//   registry.add("ucp_requests", "Requests served.", {}, requests);
//   requests.add(worker_index);               // on worker `worker_index`, per request
//
// Thread contract: add() on shard i from one thread at a time (its worker); value()
// from any thread.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ucp::metrics {

class Counter {
 public:
  explicit Counter(size_t shards = 1)
      : shards_(std::make_unique<Shard[]>(shards ? shards : 1)), count_(shards ? shards : 1) {}

  /// Adds `n` on shard `shard` (< shards()).
  void add(size_t shard, uint64_t n = 1) noexcept {
    auto& cell = shards_[shard].value;
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  /// The sum over the shards.
  uint64_t value() const noexcept {
    uint64_t total = 0;
    for (size_t i = 0; i < count_; ++i) total += shards_[i].value.load(std::memory_order_relaxed);
    return total;
  }
  size_t shards() const noexcept { return count_; }

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> value{0};
  };
  std::unique_ptr<Shard[]> shards_;
  size_t count_;
};

}  // namespace ucp::metrics
