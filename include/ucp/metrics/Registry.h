#pragma once
// Registry: the metrics a process exports, rendered on demand in the Prometheus text format
// (Exposition.h) for whatever serves the scrape (an HttpServer route, say).
//
// The metrics themselves (Counter, Gauge, Histogram, LatencyHistogram shards) belong to the
// code that updates them; the registry holds a reference to each under a name, help text and
// labels, and must not outlive them (or remove() them first). Series that share a name form
// one family (one HELP/TYPE block): same type, same label names, distinct label values.
//
//   metrics::Registry registry;
//   metrics::Counter ok(workers), not_found(workers);
//   auto added = registry.add("http_responses", "Responses sent.", {{"code", "200"}}, ok);
//   if (added) added = registry.add("http_responses", "Responses sent.", {{"code", "404"}},
//                                   not_found);
//   if (!added) { /* added.error().message says which name or label, and why */ }
//   registry.add_collector(metrics::write_process_metrics);   // process_*, from /proc
//   std::string text = registry.render();
//
// Counter names get the `_total` suffix when they lack it. Registration validates names
// (metric: [a-zA-Z_:][a-zA-Z0-9_:]*, label: [a-zA-Z_][a-zA-Z0-9_]*, no leading "__", no `le`)
// and returns an Error saying what is wrong; nothing is registered then.
//
// Thread contract: every member from any thread (one mutex; registrations and scrapes only,
// never the hot path: updates go to the metrics, not through here).

#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/metrics/Counter.h"
#include "ucp/metrics/Exposition.h"
#include "ucp/metrics/Gauge.h"
#include "ucp/metrics/Histogram.h"
#include "ucp/metrics/LatencyHistogram.h"

namespace ucp::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Result<void, Error> add(std::string_view name, std::string_view help, Labels labels,
                          const Counter& counter);
  Result<void, Error> add(std::string_view name, std::string_view help, Labels labels,
                          const Gauge& gauge);
  Result<void, Error> add(std::string_view name, std::string_view help, Labels labels,
                          const Histogram& histogram);
  /// Per-worker LatencyHistogram shards (nanoseconds), summed at scrape time and rendered as
  /// a Prometheus histogram in seconds with `bounds_seconds` as its `le` buckets (counts
  /// exact to the LatencyHistogram's resolution, < 1 % of the bound). The shards must stay
  /// where they are (a std::vector not resized, an array) while registered.
  Result<void, Error> add(std::string_view name, std::string_view help, Labels labels,
                          std::span<const LatencyHistogram> shards,
                          std::vector<double> bounds_seconds = Histogram::latency_seconds_bounds());

  /// Adds a function that writes families of its own at every scrape, after the registered
  /// series (process_* and ucp_build_info: ProcessMetrics.h). It runs on the scraping
  /// thread, under the registry's lock.
  void add_collector(std::function<void(Exposition&)> collector);

  /// Forgets every series of `metric` (before it is destroyed).
  void remove(const Counter& metric) { remove_series(&metric); }
  void remove(const Gauge& metric) { remove_series(&metric); }
  void remove(const Histogram& metric) { remove_series(&metric); }
  void remove(std::span<const LatencyHistogram> shards) { remove_series(shards.data()); }

  /// The text exposition of every family, then the collectors'.
  std::string render() const;
  void render(std::string& out) const;

 private:
  struct LatencySeries {
    std::span<const LatencyHistogram> shards;
    std::vector<double> bounds;
  };
  using Source = std::variant<const Counter*, const Gauge*, const Histogram*, LatencySeries>;
  struct Series {
    Labels labels;
    Source source;
    const void* identity;
  };
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::vector<std::string> label_names;
    std::vector<Series> series;
  };

  Result<void, Error> add_series(std::string name, std::string_view help, MetricType type,
                                 Labels labels, Source source, const void* identity);
  void remove_series(const void* identity);
  static void render_family(const Family& family, Exposition& out);

  mutable std::mutex mutex_;
  std::vector<Family> families_;
  std::vector<std::function<void(Exposition&)>> collectors_;
};

}  // namespace ucp::metrics
