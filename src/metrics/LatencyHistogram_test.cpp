#include "ucp/metrics/LatencyHistogram.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ucp::metrics {
namespace {

using H = LatencyHistogram;

// 28 KiB each: on the heap, like the workers' shards.
std::unique_ptr<H> make() { return std::make_unique<H>(); }

/// The sample of rank round(p/100 × n) (at least 1) of the sorted samples: the definition the
/// histogram answers to, computed exactly.
int64_t exact_percentile(const std::vector<int64_t>& sorted, double p) {
  const auto rank = std::max<size_t>(
      1, static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()) + 0.5));
  return sorted[std::min(rank, sorted.size()) - 1];
}

/// Latencies as a server shows them: a body around 40 µs, a tail out to seconds, and a few
/// values spread over the whole range.
std::vector<int64_t> samples(size_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::lognormal_distribution<double> body(std::log(40'000.0), 0.4);
  std::exponential_distribution<double> tail(1.0 / 2e6);
  std::uniform_real_distribution<double> exponent(3.0, 10.0);
  std::vector<int64_t> values;
  values.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (i % 10) {
      case 0:
        v = std::pow(10.0, exponent(random));
        break;
      case 1:
      case 2:
        v = 1'000 + tail(random);
        break;
      default:
        v = body(random);
    }
    values.push_back(std::clamp(static_cast<int64_t>(v), H::kLowestNs, H::kHighestNs));
  }
  return values;
}

TEST(LatencyHistogram, EveryValueFallsInABucketNarrowerThanOnePercentOfIt) {
  EXPECT_EQ(H::kBucketCount, 27u);
  EXPECT_EQ(H::kCountsLength, 3584u);
  size_t previous = 0;
  for (uint64_t v = static_cast<uint64_t>(H::kLowestNs); v <= static_cast<uint64_t>(H::kHighestNs);
       v += v / 97 + 1) {
    const size_t index = H::index_of(v);
    ASSERT_LT(index, H::kCountsLength) << v;
    ASSERT_GE(index, previous) << v;  // monotonic in the value
    previous = index;
    ASSERT_LE(H::lowest_value(index), v);
    ASSERT_GE(H::highest_value(index), v);
    const uint64_t width = H::highest_value(index) - H::lowest_value(index) + 1;
    ASSERT_LE(width * 128, v) << "bucket of " << v << " is " << width << " wide";
    // The next bucket starts where this one ends.
    if (index + 1 < H::kCountsLength) {
      ASSERT_EQ(H::lowest_value(index + 1), H::highest_value(index) + 1);
    }
  }
  EXPECT_EQ(H::index_of(static_cast<uint64_t>(H::kHighestNs)) / H::kHalfCount, H::kBucketCount);
}

TEST(LatencyHistogram, PercentilesAreWithinOnePercentOfTheExactOnes) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    std::vector<int64_t> values = samples(200'000, seed);
    auto h = make();
    for (const int64_t v : values) h->record(v);
    std::sort(values.begin(), values.end());
    ASSERT_EQ(h->count(), values.size());
    for (const double p : {0.0, 1.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0}) {
      const auto exact = static_cast<double>(exact_percentile(values, p));
      const auto got = static_cast<double>(h->value_at_percentile(p));
      EXPECT_GE(got, exact) << "p" << p;  // the bucket's upper edge: never below
      EXPECT_LE((got - exact) / exact, 0.01) << "p" << p << ": " << got << " vs " << exact;
    }
    EXPECT_EQ(h->min_ns(), values.front());
    EXPECT_EQ(h->max_ns(), values.back());
    double sum = 0;
    for (const int64_t v : values) sum += static_cast<double>(v);
    EXPECT_NEAR(h->mean_ns(), sum / static_cast<double>(values.size()), 1e-6 * sum);
    EXPECT_EQ(h->below_range(), 0u);
    EXPECT_EQ(h->above_range(), 0u);
  }
}

TEST(LatencyHistogram, ValuesOutsideTheRangeAreClampedAndCounted) {
  auto h = make();
  h->record(0);
  h->record(-5);
  h->record(999);
  h->record(1'000);
  h->record(int64_t{20'000'000'000});
  h->record(std::chrono::hours(1));
  EXPECT_EQ(h->count(), 6u);
  EXPECT_EQ(h->below_range(), 3u);
  EXPECT_EQ(h->above_range(), 2u);
  EXPECT_EQ(h->min_ns(), H::kLowestNs);
  EXPECT_EQ(h->max_ns(), H::kHighestNs);
  EXPECT_EQ(h->value_at_percentile(0), H::kLowestNs + 3);  // 1000's bucket: [1000, 1003]
  EXPECT_EQ(h->value_at_percentile(100), H::kHighestNs);
  EXPECT_EQ(h->count_at_or_above(H::kHighestNs), 2u);
}

TEST(LatencyHistogram, AnEmptyHistogramAnswersZero) {
  auto h = make();
  EXPECT_EQ(h->count(), 0u);
  EXPECT_EQ(h->value_at_percentile(99), 0);
  EXPECT_EQ(h->min_ns(), 0);
  EXPECT_EQ(h->max_ns(), 0);
  EXPECT_EQ(h->mean_ns(), 0.0);
  std::string out;
  h->write_hgrm(out);
  EXPECT_NE(out.find("Total count    =            0"), std::string::npos) << out;
}

TEST(LatencyHistogram, MergeEqualsRecordingEverythingInOne) {
  const std::vector<int64_t> a = samples(50'000, 7);
  const std::vector<int64_t> b = samples(30'000, 8);
  auto one = make();
  auto two = make();
  auto all = make();
  for (const int64_t v : a) one->record(v), all->record(v);
  for (const int64_t v : b) two->record(v), all->record(v);
  auto merged = make();
  merged->merge(*one);
  merged->merge(*two);
  EXPECT_EQ(merged->count(), all->count());
  EXPECT_EQ(merged->min_ns(), all->min_ns());
  EXPECT_EQ(merged->max_ns(), all->max_ns());
  EXPECT_EQ(merged->sum_ns(), all->sum_ns());
  for (const double p : {50.0, 90.0, 99.0, 99.9, 99.99}) {
    EXPECT_EQ(merged->value_at_percentile(p), all->value_at_percentile(p)) << p;
  }
  merged->reset();
  EXPECT_EQ(merged->count(), 0u);
  EXPECT_EQ(merged->max_ns(), 0);
}

TEST(LatencyHistogram, TheDifferenceOfTwoSnapshotsIsTheInterval) {
  auto h = make();
  for (int i = 0; i < 10'000; ++i) h->record(int64_t{50'000});  // before: all 50 µs
  const H before = *h;
  auto interval_only = make();
  for (int i = 1; i <= 1'000; ++i) {  // the interval: 1 .. 1000 ms
    h->record(int64_t{i} * 1'000'000);
    interval_only->record(int64_t{i} * 1'000'000);
  }
  const H interval = H::difference(*h, before);
  EXPECT_EQ(interval.count(), 1'000u);
  EXPECT_EQ(interval.sum_ns(), interval_only->sum_ns());
  for (const double p : {0.0, 50.0, 99.0, 99.9, 100.0}) {
    EXPECT_EQ(interval.value_at_percentile(p), interval_only->value_at_percentile(p)) << p;
  }
  // The whole history's p50 is 50 µs; the interval's is 500 ms.
  EXPECT_EQ(h->value_at_percentile(50), H::highest_value(H::index_of(50'000)));
  EXPECT_NEAR(static_cast<double>(interval.value_at_percentile(50)), 500e6, 500e6 * 0.01);
  // Extremes: those of the buckets, inside the true ones' buckets.
  EXPECT_EQ(H::index_of(static_cast<uint64_t>(interval.min_ns())), H::index_of(1'000'000));
  EXPECT_EQ(interval.max_ns(), 1'000'000'000);
  // Nothing recorded in between: an empty interval.
  EXPECT_EQ(H::difference(*h, *h).count(), 0u);
}

TEST(LatencyHistogram, CountsAtOrAboveAndBelowAValueSplitTheSamples) {
  auto h = make();
  for (int i = 1; i <= 100; ++i) h->record(int64_t{i} * 1'000'000);  // 1 .. 100 ms
  EXPECT_EQ(h->count_at_or_above(50'000'000), 51u);
  EXPECT_EQ(h->count_at_or_below(50'000'000), 50u);
  EXPECT_EQ(h->count_at_or_above(0), 100u);
  EXPECT_EQ(h->count_at_or_below(int64_t{1} << 40), 100u);
}

/// One parsed line of an .hgrm file.
struct HgrmLine {
  double value;
  double percentile;
  uint64_t total;
};

std::vector<HgrmLine> parse_hgrm(const std::string& text) {
  std::vector<HgrmLine> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.find("Value") != std::string::npos) continue;
    std::istringstream fields(line);
    HgrmLine l{};
    fields >> l.value >> l.percentile >> l.total;
    lines.push_back(l);
  }
  return lines;
}

TEST(LatencyHistogram, WritesTheHdrHistogramPercentileDistribution) {
  auto h = make();
  for (int i = 1; i <= 10'000; ++i) h->record(int64_t{i} * 1'000);  // 1 .. 10,000 µs
  std::string out;
  h->write_hgrm(out);
  EXPECT_EQ(out.rfind("       Value     Percentile TotalCount 1/(1-Percentile)\n\n", 0), 0u)
      << out.substr(0, 200);
  const std::vector<HgrmLine> lines = parse_hgrm(out);
  ASSERT_GT(lines.size(), 40u);
  EXPECT_DOUBLE_EQ(lines.front().percentile, 0.0);
  EXPECT_NEAR(lines.front().value, 1.0, 0.01);  // µs
  EXPECT_DOUBLE_EQ(lines.back().percentile, 1.0);
  EXPECT_EQ(lines.back().total, 10'000u);
  EXPECT_DOUBLE_EQ(lines.back().value, 10'000.0);
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_GE(lines[i].percentile, lines[i - 1].percentile);
    EXPECT_GE(lines[i].value, lines[i - 1].value);
    EXPECT_GE(lines[i].total, lines[i - 1].total);
  }
  // Each reported step: its value is where the cumulative count reaches the percentile.
  for (const HgrmLine& l : lines) {
    EXPECT_GE(static_cast<double>(l.total), l.percentile * 10'000 - 1e-6);
    EXPECT_NEAR(l.value, static_cast<double>(l.total), static_cast<double>(l.total) * 0.01);
  }
  // 5 steps per halving from 0 to 50 %: 0, 10, 20, 30, 40, 50.
  EXPECT_NEAR(lines[5].percentile, 0.5, 1e-9);
  EXPECT_NE(out.find("#[Max     =    10000.000, Total count    =        10000]"), std::string::npos)
      << out.substr(out.size() - 200);
  EXPECT_NE(out.find("#[Buckets =           27, SubBuckets     =          256]"),
            std::string::npos);
  // The last line has no 1/(1-p) column (infinite there), as HdrHistogram writes it.
  const auto footer = out.find("#[Mean");
  const auto last_start = out.rfind('\n', footer - 2) + 1;
  std::istringstream last(out.substr(last_start, footer - last_start));
  std::string field;
  int fields = 0;
  while (last >> field) ++fields;
  EXPECT_EQ(fields, 3) << out.substr(last_start, footer - last_start);
}

TEST(LatencyHistogram, CopiesTakeEveryCounter) {
  auto h = make();
  for (int i = 0; i < 1000; ++i) h->record(int64_t{i} * 10'000);
  const H copy = *h;
  EXPECT_EQ(copy.count(), h->count());
  EXPECT_EQ(copy.below_range(), h->below_range());
  EXPECT_EQ(copy.min_ns(), h->min_ns());
  EXPECT_EQ(copy.max_ns(), h->max_ns());
  EXPECT_EQ(copy.value_at_percentile(99.9), h->value_at_percentile(99.9));
}

}  // namespace
}  // namespace ucp::metrics
