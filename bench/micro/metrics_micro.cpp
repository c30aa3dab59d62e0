// metrics_micro: what recording a metric costs on a worker's hot path.
//
//   LatencyHistogramRecord   LatencyHistogram::record of a pre-drawn duration (log-uniform
//                            1 µs .. 10 s, so the bucket index is not predictable)
//   LatencyHistogramRecordNow   the same with the clock read a caller does per sample
//   CounterAdd               Counter::add on the worker's shard
//   HistogramObserve         Histogram::observe (fixed Prometheus buckets, binary search)
//   HistogramMerge           LatencyHistogram::merge of one full shard (scrape-time work)
//
// `per_op` is the time per recorded sample. Single thread: the scrape side is not measured.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "ucp/metrics/Counter.h"
#include "ucp/metrics/Histogram.h"
#include "ucp/metrics/LatencyHistogram.h"

namespace ucp::metrics {
namespace {

constexpr size_t kValues = 4096;  // a power of two: the loop masks its index

std::vector<int64_t> durations_ns() {
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> exponent(3.0, 10.0);
  std::vector<int64_t> values(kValues);
  for (auto& v : values) v = static_cast<int64_t>(std::pow(10.0, exponent(random)));
  return values;
}

void per_op(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void LatencyHistogramRecord(benchmark::State& state) {
  const std::vector<int64_t> values = durations_ns();
  auto histogram = std::make_unique<LatencyHistogram>();
  size_t i = 0;
  for (auto _ : state) {
    histogram->record(values[i++ & (kValues - 1)]);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(histogram->count());
  per_op(state);
}
BENCHMARK(LatencyHistogramRecord);

void LatencyHistogramRecordNow(benchmark::State& state) {
  auto histogram = std::make_unique<LatencyHistogram>();
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const auto now = std::chrono::steady_clock::now();
    histogram->record(now - start);
    start = now;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(histogram->count());
  per_op(state);
}
BENCHMARK(LatencyHistogramRecordNow);

void CounterAdd(benchmark::State& state) {
  Counter counter(4);
  for (auto _ : state) {
    counter.add(1);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(counter.value());
  per_op(state);
}
BENCHMARK(CounterAdd);

void HistogramObserve(benchmark::State& state) {
  const std::vector<int64_t> values = durations_ns();
  std::vector<double> seconds;
  for (const int64_t v : values) seconds.push_back(static_cast<double>(v) / 1e9);
  Histogram histogram(Histogram::latency_seconds_bounds(), 4);
  size_t i = 0;
  for (auto _ : state) {
    histogram.observe(1, seconds[i++ & (kValues - 1)]);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(histogram.snapshot().count);
  per_op(state);
}
BENCHMARK(HistogramObserve);

void HistogramMerge(benchmark::State& state) {
  auto shard = std::make_unique<LatencyHistogram>();
  for (const int64_t v : durations_ns()) shard->record(v);
  auto merged = std::make_unique<LatencyHistogram>();
  for (auto _ : state) {
    merged->merge(*shard);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(merged->count());
  per_op(state);
}
BENCHMARK(HistogramMerge);

}  // namespace
}  // namespace ucp::metrics
