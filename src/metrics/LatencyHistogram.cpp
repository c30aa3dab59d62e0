#include "ucp/metrics/LatencyHistogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace ucp::metrics {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

/// Counts as one reader saw them, with the total of exactly those counts: the queries below
/// work on this, so that a histogram being recorded into answers consistently.
struct Counts {
  std::array<uint64_t, LatencyHistogram::kCountsLength> at{};
  uint64_t total = 0;

  explicit Counts(const std::array<std::atomic<uint64_t>, LatencyHistogram::kCountsLength>& cells) {
    for (size_t i = 0; i < at.size(); ++i) {
      at[i] = cells[i].load(kRelaxed);
      total += at[i];
    }
  }
};

uint64_t midpoint(size_t index) noexcept {
  return (LatencyHistogram::lowest_value(index) + LatencyHistogram::highest_value(index) + 1) / 2;
}

void append(std::string& out, const char* format, auto... args) {
  char line[160];
  const int n = std::snprintf(line, sizeof line, format, args...);
  if (n > 0) out.append(line, std::min(static_cast<size_t>(n), sizeof line - 1));
}

}  // namespace

uint64_t LatencyHistogram::lowest_value(size_t index) noexcept {
  // The inverse of index_of: counters [0, 256) are values 0..255; from there each run of 128
  // counters is one power of two, its sub-bucket s in [128, 256) holding [s << b, (s+1) << b).
  const auto band = static_cast<unsigned>(index >> kHalfBits);
  const uint64_t offset = index & (kHalfCount - 1);
  if (band == 0) return offset;
  const unsigned shift = band - 1;
  return (kHalfCount + offset) << shift;
}

uint64_t LatencyHistogram::highest_value(size_t index) noexcept {
  const auto band = static_cast<unsigned>(index >> kHalfBits);
  const unsigned shift = band == 0 ? 0 : band - 1;
  return lowest_value(index) + (uint64_t{1} << shift) - 1;
}

void LatencyHistogram::assign(const LatencyHistogram& other) noexcept {
  for (size_t i = 0; i < kCountsLength; ++i) {
    counts_[i].store(other.counts_[i].load(kRelaxed), kRelaxed);
  }
  sum_.store(other.sum_.load(kRelaxed), kRelaxed);
  below_.store(other.below_.load(kRelaxed), kRelaxed);
  above_.store(other.above_.load(kRelaxed), kRelaxed);
  min_.store(other.min_.load(kRelaxed), kRelaxed);
  max_.store(other.max_.load(kRelaxed), kRelaxed);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (size_t i = 0; i < kCountsLength; ++i) bump(counts_[i], other.counts_[i].load(kRelaxed));
  bump(sum_, other.sum_.load(kRelaxed));
  bump(below_, other.below_.load(kRelaxed));
  bump(above_, other.above_.load(kRelaxed));
  min_.store(std::min(min_.load(kRelaxed), other.min_.load(kRelaxed)), kRelaxed);
  max_.store(std::max(max_.load(kRelaxed), other.max_.load(kRelaxed)), kRelaxed);
}

void LatencyHistogram::reset() noexcept {
  for (auto& cell : counts_) cell.store(0, kRelaxed);
  sum_.store(0, kRelaxed);
  below_.store(0, kRelaxed);
  above_.store(0, kRelaxed);
  min_.store(UINT64_MAX, kRelaxed);
  max_.store(0, kRelaxed);
}

LatencyHistogram LatencyHistogram::difference(const LatencyHistogram& later,
                                              const LatencyHistogram& earlier) noexcept {
  // Saturating: a counter of `earlier` above `later`'s means they are not two views of one
  // histogram; an empty bucket is the least wrong answer then.
  auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  LatencyHistogram result;
  size_t first = kCountsLength;
  size_t last = 0;
  for (size_t i = 0; i < kCountsLength; ++i) {
    const uint64_t n = minus(later.counts_[i].load(kRelaxed), earlier.counts_[i].load(kRelaxed));
    result.counts_[i].store(n, kRelaxed);
    if (n != 0) {
      first = std::min(first, i);
      last = i;
    }
  }
  result.sum_.store(minus(later.sum_.load(kRelaxed), earlier.sum_.load(kRelaxed)), kRelaxed);
  result.below_.store(minus(later.below_.load(kRelaxed), earlier.below_.load(kRelaxed)), kRelaxed);
  result.above_.store(minus(later.above_.load(kRelaxed), earlier.above_.load(kRelaxed)), kRelaxed);
  if (first != kCountsLength) {
    // Within the bucket bounds, and within the overall extremes of `later`.
    result.min_.store(std::max(lowest_value(first), later.min_.load(kRelaxed)), kRelaxed);
    result.max_.store(std::min(highest_value(last), later.max_.load(kRelaxed)), kRelaxed);
  }
  return result;
}

uint64_t LatencyHistogram::count() const noexcept {
  uint64_t total = 0;
  for (const auto& cell : counts_) total += cell.load(kRelaxed);
  return total;
}

int64_t LatencyHistogram::min_ns() const noexcept {
  const uint64_t low = min_.load(kRelaxed);
  return low == UINT64_MAX ? 0 : static_cast<int64_t>(low);
}

int64_t LatencyHistogram::max_ns() const noexcept {
  return static_cast<int64_t>(max_.load(kRelaxed));
}

double LatencyHistogram::mean_ns() const noexcept {
  const uint64_t n = count();
  return n == 0 ? 0.0 : static_cast<double>(sum_.load(kRelaxed)) / static_cast<double>(n);
}

double LatencyHistogram::stddev_ns() const noexcept {
  const Counts counts(counts_);
  if (counts.total == 0) return 0.0;
  double mean = 0;
  for (size_t i = 0; i < kCountsLength; ++i) {
    mean += static_cast<double>(counts.at[i]) * static_cast<double>(midpoint(i));
  }
  mean /= static_cast<double>(counts.total);
  double squares = 0;
  for (size_t i = 0; i < kCountsLength; ++i) {
    if (counts.at[i] == 0) continue;
    const double deviation = static_cast<double>(midpoint(i)) - mean;
    squares += deviation * deviation * static_cast<double>(counts.at[i]);
  }
  return std::sqrt(squares / static_cast<double>(counts.total));
}

int64_t LatencyHistogram::value_at_percentile(double percentile) const noexcept {
  const Counts counts(counts_);
  if (counts.total == 0) return 0;
  const double fraction = std::clamp(percentile, 0.0, 100.0) / 100.0;
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(fraction * static_cast<double>(counts.total) + 0.5));
  uint64_t seen = 0;
  for (size_t i = 0; i < kCountsLength; ++i) {
    seen += counts.at[i];
    if (seen >= rank) return std::min(static_cast<int64_t>(highest_value(i)), max_ns());
  }
  return max_ns();
}

uint64_t LatencyHistogram::count_at_or_below(int64_t ns) const noexcept {
  if (ns < 0) return 0;
  uint64_t total = 0;
  for (size_t i = 0; i < kCountsLength && lowest_value(i) <= static_cast<uint64_t>(ns); ++i) {
    total += counts_[i].load(kRelaxed);
  }
  return total;
}

uint64_t LatencyHistogram::count_at_or_above(int64_t ns) const noexcept {
  uint64_t total = 0;
  for (size_t i = kCountsLength; i-- > 0;) {
    if (ns > 0 && highest_value(i) < static_cast<uint64_t>(ns)) break;
    total += counts_[i].load(kRelaxed);
  }
  return total;
}

void LatencyHistogram::write_hgrm(std::string& out, double unit_ns,
                                  int ticks_per_half_distance) const {
  const Counts counts(counts_);
  const int ticks = std::max(1, ticks_per_half_distance);
  append(out, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
  const double total = static_cast<double>(counts.total);
  auto scaled = [unit_ns](uint64_t ns) { return static_cast<double>(ns) / unit_ns; };
  // Percentile steps as HdrHistogram takes them: starting at 0, `ticks` steps per halving
  // of the distance to 100 %, each step reported at the first bucket that reaches it; the
  // last non-empty bucket ends the list at 100 %.
  double level = 0.0;
  uint64_t cumulative = 0;
  size_t last = 0;
  for (size_t i = 0; i < kCountsLength && cumulative < counts.total; ++i) {
    if (counts.at[i] == 0) continue;
    cumulative += counts.at[i];
    last = i;
    if (cumulative == counts.total) break;
    const double reached = 100.0 * static_cast<double>(cumulative) / total;
    while (level <= reached) {
      const double p = level / 100.0;
      append(out, "%12.3f %2.12f %10llu %14.2f\n", scaled(highest_value(i)), p,
             static_cast<unsigned long long>(cumulative), 1.0 / (1.0 - p));
      const auto halvings = static_cast<int>(std::log2(100.0 / (100.0 - level)));
      level += 100.0 / (ticks * std::ldexp(1.0, halvings + 1));
    }
  }
  if (counts.total > 0) {
    // The step the last bucket reaches first, then 100 % (no 1/(1-p) there: it is infinite).
    const double p = level / 100.0;
    const uint64_t high = std::min<uint64_t>(highest_value(last), max_.load(kRelaxed));
    append(out, "%12.3f %2.12f %10llu %14.2f\n", scaled(high), p,
           static_cast<unsigned long long>(counts.total), 1.0 / (1.0 - p));
    append(out, "%12.3f %2.12f %10llu\n", scaled(high), 1.0,
           static_cast<unsigned long long>(counts.total));
  }
  const double mean = counts.total == 0 ? 0.0 : static_cast<double>(sum_.load(kRelaxed)) / total;
  append(out, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean / unit_ns,
         stddev_ns() / unit_ns);
  append(out, "#[Max     = %12.3f, Total count    = %12llu]\n", scaled(max_.load(kRelaxed)),
         static_cast<unsigned long long>(counts.total));
  append(out, "#[Buckets = %12zu, SubBuckets     = %12llu]\n", kBucketCount,
         static_cast<unsigned long long>(kSubBucketCount));
}

}  // namespace ucp::metrics
