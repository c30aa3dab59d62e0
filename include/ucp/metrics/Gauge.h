#pragma once
// Gauge: a Prometheus gauge, sharded per worker like Counter (Counter.h): each worker writes
// its own shard with a relaxed load and store, a scrape sums the shards.
//
// Thread contract: set()/add() on shard i from one thread at a time (its worker); value()
// from any thread.

#include <atomic>
#include <cstddef>
#include <memory>

namespace ucp::metrics {

/// A value that goes up and down. Each shard holds its worker's part (connections open on
/// that worker, say); the gauge is their sum. A gauge only one thread sets uses shard 0.
class Gauge {
 public:
  explicit Gauge(size_t shards = 1)
      : shards_(std::make_unique<Shard[]>(shards ? shards : 1)), count_(shards ? shards : 1) {}

  void set(size_t shard, double value) noexcept {
    shards_[shard].value.store(value, std::memory_order_relaxed);
  }
  void add(size_t shard, double delta) noexcept {
    auto& cell = shards_[shard].value;
    cell.store(cell.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  void subtract(size_t shard, double delta) noexcept { add(shard, -delta); }
  double value() const noexcept {
    double total = 0;
    for (size_t i = 0; i < count_; ++i) total += shards_[i].value.load(std::memory_order_relaxed);
    return total;
  }
  size_t shards() const noexcept { return count_; }

 private:
  struct alignas(64) Shard {
    std::atomic<double> value{0};
  };
  std::unique_ptr<Shard[]> shards_;
  size_t count_;
};

}  // namespace ucp::metrics
