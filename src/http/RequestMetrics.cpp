#include "RequestMetrics.h"

#include <map>
#include <utility>

namespace ucp::http::detail {
namespace {

constexpr uint32_t key_of(Method method, int status) noexcept {
  return (static_cast<uint32_t>(method) + 1) << 16 | (static_cast<uint32_t>(status) & 0xFFFF);
}

}  // namespace

RequestMetrics::RequestMetrics(size_t workers, std::vector<std::string> routes,
                               std::vector<double> bounds, size_t pairs_per_route)
    : routes_(std::move(routes)), workers_(workers ? workers : 1), pairs_(pairs_per_route) {
  const size_t count = workers_ * (routes_.size() + 1) * (pairs_ + 1);
  slots_.reserve(count);
  for (size_t i = 0; i < count; ++i) slots_.push_back(std::make_unique<Slot>(bounds));
  for (size_t i = 0; i < workers_; ++i) {
    latency_.push_back(std::make_unique<metrics::LatencyHistogram>());
  }
}

metrics::LatencyHistogram RequestMetrics::merged_latency() const {
  metrics::LatencyHistogram all;
  for (const auto& worker : latency_) all.merge(*worker);
  return all;
}

void RequestMetrics::record(size_t worker, uint32_t route, Method method, int status,
                            std::chrono::nanoseconds duration) noexcept {
  const uint32_t key = key_of(method, status);
  const double seconds = std::chrono::duration<double>(duration).count();
  latency_[worker]->record(duration);
  // Only this worker writes its slots: a plain scan, and a claim is a plain store.
  for (size_t i = 0; i < pairs_; ++i) {
    Slot& s = slot(worker, route, i);
    const uint32_t seen = s.key.load(std::memory_order_relaxed);
    if (seen == 0) s.key.store(key, std::memory_order_relaxed);
    if (seen == 0 || seen == key) {
      s.histogram.observe(0, seconds);
      return;
    }
  }
  slot(worker, route, pairs_).histogram.observe(0, seconds);
}

void RequestMetrics::write(metrics::Exposition& out) const {
  out.family("ucp_http_request_duration_seconds", metrics::MetricType::kHistogram,
             "Time from a request's arrival in full to its response handed to the kernel, by "
             "route, method and status code (code=\"other\": pairs past the per-route slots).");
  for (size_t route = 0; route <= routes_.size(); ++route) {
    // Each (method, code) pair summed over the workers; the overflow under key 0.
    std::map<uint32_t, metrics::Histogram::Snapshot> pairs;
    for (size_t worker = 0; worker < workers_; ++worker) {
      for (size_t i = 0; i <= pairs_; ++i) {
        const Slot& s = slot(worker, static_cast<uint32_t>(route), i);
        const uint32_t key = i == pairs_ ? 0 : s.key.load(std::memory_order_relaxed);
        if (i < pairs_ && key == 0) continue;
        metrics::Histogram::Snapshot snapshot = s.histogram.snapshot();
        if (snapshot.count == 0) continue;
        auto [it, fresh] = pairs.try_emplace(key, snapshot);
        if (fresh) continue;
        for (size_t b = 0; b < snapshot.cumulative.size(); ++b) {
          it->second.cumulative[b] += snapshot.cumulative[b];
        }
        it->second.sum += snapshot.sum;
        it->second.count += snapshot.count;
      }
    }
    const std::string& name = route < routes_.size() ? routes_[route] : std::string("unmatched");
    for (const auto& [key, snapshot] : pairs) {
      const std::string method =
          key == 0 ? "other" : std::string(to_string(static_cast<Method>((key >> 16) - 1)));
      const std::string code = key == 0 ? "other" : std::to_string(key & 0xFFFF);
      out.histogram("ucp_http_request_duration_seconds",
                    {{"route", name}, {"method", method}, {"code", code}}, snapshot.bounds,
                    snapshot.cumulative, snapshot.sum);
    }
  }
}

}  // namespace ucp::http::detail
