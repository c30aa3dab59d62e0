#pragma once
// Histogram: a Prometheus histogram with fixed buckets (cumulative `le` buckets, `_sum`,
// `_count` when rendered), sharded per worker like Counter: each worker observes into its
// own shard with relaxed loads and stores, a scrape sums the shards.
//
//   metrics::Histogram duration(metrics::Histogram::latency_seconds_bounds(), workers);
//   registry.add("ucp_request_duration_seconds", "Request duration.", {}, duration);
//   duration.observe(worker_index, elapsed);   // a std::chrono duration, or seconds
//
// For percentiles (p99.9 over a stats interval) use LatencyHistogram, whose buckets are fine
// enough (< 1 %); Registry can render one as a Prometheus histogram too.
//
// Thread contract: observe() on shard i from one thread at a time (its worker); the const
// members from any thread.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ucp::metrics {

class Histogram {
 public:
  /// `bounds`: the buckets' upper bounds (`le`). They are sorted; duplicates and non-finite
  /// values are dropped (the +Inf bucket always exists).
  explicit Histogram(std::vector<double> bounds, size_t shards = 1);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  /// Request latencies in seconds: 50 µs .. 10 s, 1-2.5-5 per decade.
  static std::vector<double> latency_seconds_bounds();

  /// Counts `value` in the first bucket whose bound is >= value (NaN: only in +Inf).
  void observe(size_t shard, double value) noexcept;
  template <class Rep, class Period>
  void observe(size_t shard, std::chrono::duration<Rep, Period> duration) noexcept {
    observe(shard, std::chrono::duration<double>(duration).count());
  }

  /// The shards summed, as a scrape renders them.
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries: <= each bound, then all
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

  const std::vector<double>& bounds() const noexcept { return bounds_; }
  size_t shards() const noexcept { return shard_count_; }

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> cell[8] = {};
  };
  std::atomic<uint64_t>& cell(size_t shard, size_t i) const noexcept {
    return lines_[shard * lines_per_shard_ + i / 8].cell[i % 8];
  }

  std::vector<double> bounds_;
  size_t shard_count_;
  size_t lines_per_shard_;  // bucket counts, then the sum (a double's bits)
  std::unique_ptr<Line[]> lines_;
};

}  // namespace ucp::metrics
