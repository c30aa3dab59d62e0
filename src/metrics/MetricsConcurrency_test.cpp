// Workers record into their own shards while another thread scrapes: no lock, no locked
// instruction on the workers' side, and the scrape still sees consistent, growing figures
// (run under TSan: label `threads`).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/metrics/Registry.h"

namespace ucp::metrics {
namespace {

constexpr size_t kWorkers = 4;
constexpr size_t kScrapes = 200;                // scrapes made while every worker records
constexpr uint64_t kMaxPerWorker = 20'000'000;  // bounds the run if scrapes are slow

/// The value of the first sample line of `name` (a full name, no labels) in `text`.
double sample_value(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(MetricsConcurrency, AScrapeWhileWorkersRecordSeesGrowingConsistentFigures) {
  Registry registry;
  Counter requests(kWorkers);
  Gauge in_flight(kWorkers);
  Histogram duration(Histogram::latency_seconds_bounds(), kWorkers);
  std::vector<LatencyHistogram> latency(kWorkers);
  ASSERT_TRUE(registry.add("requests", "Requests.", {}, requests));
  ASSERT_TRUE(registry.add("in_flight", "Requests in flight.", {}, in_flight));
  ASSERT_TRUE(registry.add("duration_seconds", "Duration.", {}, duration));
  ASSERT_TRUE(registry.add("latency_seconds", "Latency.", {}, latency));

  std::atomic<size_t> started{0};
  std::atomic<bool> stop{false};
  std::vector<uint64_t> recorded(kWorkers, 0);
  std::vector<std::thread> workers;
  for (size_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      started.fetch_add(1);
      uint64_t i = 0;
      for (; i < kMaxPerWorker && !stop.load(std::memory_order_relaxed); ++i) {
        in_flight.add(w, 1);
        const auto ns = static_cast<int64_t>(1'000 + (i * 7919 + w) % 5'000'000);
        latency[w].record(ns);
        duration.observe(w, static_cast<double>(ns) / 1e9);
        requests.add(w);
        in_flight.subtract(w, 1);
      }
      recorded[w] = i;
    });
  }
  while (started.load() < kWorkers) std::this_thread::yield();

  double last_requests = 0;
  double last_count = 0;
  auto merged = std::make_unique<LatencyHistogram>();
  for (size_t scrapes = 0; scrapes < kScrapes; ++scrapes) {
    const std::string text = registry.render();
    const double now_requests = sample_value(text, "requests_total");
    const double now_count = sample_value(text, "duration_seconds_count");
    EXPECT_GE(now_requests, last_requests);
    EXPECT_GE(now_count, last_count);
    EXPECT_LE(now_requests, static_cast<double>(kWorkers * kMaxPerWorker));
    const double open = sample_value(text, "in_flight");
    EXPECT_GE(open, -static_cast<double>(kWorkers));
    EXPECT_LE(open, static_cast<double>(kWorkers));
    last_requests = now_requests;
    last_count = now_count;
    merged->reset();
    for (const auto& shard : latency) merged->merge(shard);
    EXPECT_LE(merged->count(), kWorkers * kMaxPerWorker);
    EXPECT_LE(merged->value_at_percentile(99), 5'001'000);
  }
  stop.store(true);
  for (auto& worker : workers) worker.join();
  uint64_t total = 0;
  for (const uint64_t n : recorded) total += n;
  EXPECT_GE(last_requests, 1.0);  // the scrapes overlapped the recording

  // Once the workers are done, every figure is exact.
  const std::string text = registry.render();
  EXPECT_EQ(sample_value(text, "requests_total"), static_cast<double>(total));
  EXPECT_EQ(sample_value(text, "duration_seconds_count"), static_cast<double>(total));
  EXPECT_EQ(sample_value(text, "latency_seconds_count"), static_cast<double>(total));
  EXPECT_EQ(sample_value(text, "in_flight"), 0.0);
}

}  // namespace
}  // namespace ucp::metrics
