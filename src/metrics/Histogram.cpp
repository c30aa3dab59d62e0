#include "ucp/metrics/Histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ucp::metrics {

Histogram::Histogram(std::vector<double> bounds, size_t shards)
    : bounds_(std::move(bounds)), shard_count_(shards ? shards : 1) {
  std::erase_if(bounds_, [](double b) { return !std::isfinite(b); });
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  const size_t cells = bounds_.size() + 2;  // the buckets, +Inf, the sum
  lines_per_shard_ = (cells + 7) / 8;
  lines_ = std::make_unique<Line[]>(lines_per_shard_ * shard_count_);
}

std::vector<double> Histogram::latency_seconds_bounds() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};
}

void Histogram::observe(size_t shard, double value) noexcept {
  const size_t bucket =
      std::isnan(value)
          ? bounds_.size()
          : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                bounds_.begin());
  auto& count = cell(shard, bucket);
  count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  auto& sum = cell(shard, bounds_.size() + 1);
  const double total = std::bit_cast<double>(sum.load(std::memory_order_relaxed)) + value;
  sum.store(std::bit_cast<uint64_t>(total), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  snapshot.cumulative.assign(bounds_.size() + 1, 0);
  for (size_t shard = 0; shard < shard_count_; ++shard) {
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      snapshot.cumulative[i] += cell(shard, i).load(std::memory_order_relaxed);
    }
    snapshot.sum +=
        std::bit_cast<double>(cell(shard, bounds_.size() + 1).load(std::memory_order_relaxed));
  }
  for (size_t i = 1; i < snapshot.cumulative.size(); ++i) {
    snapshot.cumulative[i] += snapshot.cumulative[i - 1];
  }
  snapshot.count = snapshot.cumulative.back();
  return snapshot;
}

}  // namespace ucp::metrics
