#pragma once
// RequestMetrics: request durations by route, method and status code, one set of histograms
// per worker, for HttpServer::enable_metrics. Private to src/http.
//
// Layout: for every worker and route (plus one for requests no route matched), a few slots,
// each a (method, code) key and a metrics::Histogram of one shard. The worker that owns them
// finds its slot by a short scan of the keys (claiming an empty one the first time a pair is
// seen) and observes into it: relaxed loads and stores only, no lock, no locked instruction,
// no allocation. Pairs beyond the slots go to one overflow histogram per route
// (method="other", code="other"), so memory stays what start() allocated whatever clients
// send. A scrape sums the workers' histograms of each pair. Each worker also records every
// duration into a LatencyHistogram of its own (fine enough for p99.9: the stats line).
//
// Thread contract: record() for worker w on w's thread only; write() from any thread.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucp/http/Request.h"
#include "ucp/metrics/Exposition.h"
#include "ucp/metrics/Histogram.h"
#include "ucp/metrics/LatencyHistogram.h"

namespace ucp::http::detail {

class RequestMetrics {
 public:
  /// `routes`: the route names by id; requests without a route are recorded under route id
  /// routes.size() ("unmatched").
  RequestMetrics(size_t workers, std::vector<std::string> routes, std::vector<double> bounds,
                 size_t pairs_per_route);
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  void record(size_t worker, uint32_t route, Method method, int status,
              std::chrono::nanoseconds duration) noexcept;
  /// The ucp_http_request_duration_seconds family.
  void write(metrics::Exposition& out) const;
  /// Every worker's durations merged, at LatencyHistogram's resolution (for percentiles).
  metrics::LatencyHistogram merged_latency() const;

  uint32_t unmatched_route() const noexcept { return static_cast<uint32_t>(routes_.size()); }

 private:
  struct Slot {
    explicit Slot(const std::vector<double>& bounds) : histogram(bounds, 1) {}
    std::atomic<uint32_t> key{0};  // 0: free; else (method + 1) << 16 | status
    metrics::Histogram histogram;
  };
  Slot& slot(size_t worker, uint32_t route, size_t index) const noexcept {
    return *slots_[(worker * (routes_.size() + 1) + route) * (pairs_ + 1) + index];
  }

  std::vector<std::string> routes_;
  size_t workers_;
  size_t pairs_;  // slots per worker and route, besides the overflow one
  std::vector<std::unique_ptr<Slot>> slots_;
  // Per worker: the same durations, fine-grained (28 KiB each), for p99.9 and the stats line.
  std::vector<std::unique_ptr<metrics::LatencyHistogram>> latency_;
};

}  // namespace ucp::http::detail
