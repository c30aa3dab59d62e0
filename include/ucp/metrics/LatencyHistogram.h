#pragma once
// LatencyHistogram: a log-linear histogram of durations in the HdrHistogram style, for the
// latency distributions a trading or IM user reads (p99, p99.9, p99.99 at a fixed rate).
//
// Range 1 µs .. 10 s, in nanoseconds; a value outside is recorded at the nearest end and
// counted (below_range(), above_range()). Resolution: 256 sub-buckets per power of two, the
// upper half of each used from the second power on, so a bucket is never wider than 1/128 of
// the values it holds: every reported value is within 0.8 % of the true one (HdrHistogram
// with 2 significant digits and a unit of 1 ns).
//
//   index:  0 ............ 255 | 256 ... 383 | 384 ... 511 | ... | 3456 ... 3583
//   value:  0, 1, ... 255       | 256, 258, ..| 512, 516, ..|     | 2^33 .. 2^34, step 2^26
//           (step 1)              (step 2)      (step 4)
//
// Values below 1 µs never land below index 250, so the first buckets stay empty: the price of
// one formula with no branch (the index is clz, a shift and an add).
//
// Fixed memory (3,584 counters, 28 KiB), no allocation. record() is a few nanoseconds: no
// branch beyond the index, no locked instruction. Counters are std::atomic written with a
// relaxed load and store (plain moves on x86), so that another thread may read a histogram
// while its owner records: the pattern of per-worker shards summed at scrape time.
//
// Thread contract: record(), merge() into and reset() on one thread at a time (the owner);
// the const members (queries, copies, merge *from*) from any thread, at any time. A reader
// that races with the owner sees each counter either before or after a record: the total
// and the percentiles are those of the counts it read.

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ucp::metrics {

class LatencyHistogram {
 public:
  static constexpr int64_t kLowestNs = 1'000;            // 1 µs
  static constexpr int64_t kHighestNs = 10'000'000'000;  // 10 s
  static constexpr unsigned kSubBucketBits = 8;          // 256 sub-buckets: < 1 % error
  static constexpr uint64_t kSubBucketCount = uint64_t{1} << kSubBucketBits;
  static constexpr unsigned kHalfBits = kSubBucketBits - 1;
  static constexpr uint64_t kHalfCount = kSubBucketCount / 2;
  /// Powers of two needed to reach kHighestNs: the last one holds [2^33, 2^34) ns.
  static constexpr size_t kBucketCount =
      static_cast<size_t>(std::bit_width(static_cast<uint64_t>(kHighestNs))) - kSubBucketBits + 1;
  static constexpr size_t kCountsLength = (kBucketCount + 1) * kHalfCount;

  LatencyHistogram() noexcept = default;
  /// A copy of `other`'s counts as this thread reads them (safe while its owner records).
  LatencyHistogram(const LatencyHistogram& other) noexcept { assign(other); }
  LatencyHistogram& operator=(const LatencyHistogram& other) noexcept {
    if (this != &other) assign(other);
    return *this;
  }

  /// Records one duration in nanoseconds (clamped to [kLowestNs, kHighestNs]).
  void record(int64_t ns) noexcept {
    const int64_t clamped = ns < kLowestNs ? kLowestNs : (ns > kHighestNs ? kHighestNs : ns);
    const auto value = static_cast<uint64_t>(clamped);
    bump(counts_[index_of(value)], 1);
    bump(below_, ns < kLowestNs ? 1 : 0);
    bump(above_, ns > kHighestNs ? 1 : 0);
    bump(sum_, value);
    const uint64_t low = min_.load(std::memory_order_relaxed);
    min_.store(value < low ? value : low, std::memory_order_relaxed);
    const uint64_t high = max_.load(std::memory_order_relaxed);
    max_.store(value > high ? value : high, std::memory_order_relaxed);
  }
  template <class Rep, class Period>
  void record(std::chrono::duration<Rep, Period> duration) noexcept {
    record(std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
  }

  /// Adds `other`'s samples to this one (per-worker shards summed into one at scrape time).
  void merge(const LatencyHistogram& other) noexcept;
  /// Forgets every sample.
  void reset() noexcept;
  /// The samples `later` holds that `earlier` did not: with `earlier` a copy of the same
  /// histogram taken before `later`, the distribution of the interval between the two (the
  /// "p99 over the last stats interval"). Its min and max are the bounds of its lowest and
  /// highest non-empty buckets (no exact extremes survive a subtraction).
  static LatencyHistogram difference(const LatencyHistogram& later,
                                     const LatencyHistogram& earlier) noexcept;

  /// Samples recorded.
  uint64_t count() const noexcept;
  /// Samples below 1 µs (recorded as 1 µs) and above 10 s (recorded as 10 s).
  uint64_t below_range() const noexcept { return below_.load(std::memory_order_relaxed); }
  uint64_t above_range() const noexcept { return above_.load(std::memory_order_relaxed); }
  /// Smallest and largest sample, exact (after clamping); 0 without samples.
  int64_t min_ns() const noexcept;
  int64_t max_ns() const noexcept;
  /// The sum of the (clamped) samples.
  uint64_t sum_ns() const noexcept { return sum_.load(std::memory_order_relaxed); }
  /// Arithmetic mean of the (clamped) samples, exact; 0 without samples.
  double mean_ns() const noexcept;
  /// Standard deviation over the bucket midpoints (as HdrHistogram computes it).
  double stddev_ns() const noexcept;
  /// The smallest value v such that `percentile` % of the samples are <= v, to within the
  /// resolution: the upper edge of the bucket that holds the sample of rank
  /// round(percentile / 100 × count) (at least 1), never above max_ns(). 0 without samples.
  int64_t value_at_percentile(double percentile) const noexcept;
  /// Samples whose bucket starts at or below `ns` (samples <= ns, to within the resolution:
  /// what a Prometheus `le` bucket counts).
  uint64_t count_at_or_below(int64_t ns) const noexcept;
  /// Samples whose bucket ends at or above `ns` (samples >= ns, to within the resolution).
  uint64_t count_at_or_above(int64_t ns) const noexcept;

  /// Appends the percentile distribution in HdrHistogram's text format (.hgrm: the format of
  /// its outputPercentileDistribution, which wrk2 prints and the HdrHistogram plotter reads):
  /// a header, one line per percentile step (value, percentile, cumulative count,
  /// 1/(1-percentile)), `ticks_per_half_distance` steps per halving of the distance to
  /// 100 %, and the mean/max/count footer. Values are divided by `unit_ns` (1000: µs).
  void write_hgrm(std::string& out, double unit_ns = 1000.0, int ticks_per_half_distance = 5) const;

  /// Index arithmetic, public for tests and exporters: the counter a value goes to, and the
  /// lowest and highest value of a counter.
  static size_t index_of(uint64_t value) noexcept {
    // bucket: which power of two beyond the first 256 values; sub: the value's top 8 bits.
    const auto bucket =
        static_cast<unsigned>(std::bit_width(value | (kSubBucketCount - 1))) - kSubBucketBits;
    const uint64_t sub = value >> bucket;
    return static_cast<size_t>((uint64_t{bucket + 1} << kHalfBits) + sub - kHalfCount);
  }
  static uint64_t lowest_value(size_t index) noexcept;
  static uint64_t highest_value(size_t index) noexcept;

 private:
  static void bump(std::atomic<uint64_t>& cell, uint64_t n) noexcept {
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void assign(const LatencyHistogram& other) noexcept;

  std::array<std::atomic<uint64_t>, kCountsLength> counts_{};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> below_{0};
  std::atomic<uint64_t> above_{0};
  std::atomic<uint64_t> min_{UINT64_MAX};
  std::atomic<uint64_t> max_{0};
};

}  // namespace ucp::metrics
