#include "ucp/metrics/Registry.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace ucp::metrics {
namespace {

const char* type_name(MetricType type) noexcept {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "metric";
}

std::string describe(std::string_view name, const Labels& labels) {
  std::string text(name);
  text += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) text += ',';
    text.append(labels[i].name).append("=\"").append(labels[i].value).append("\"");
  }
  text += '}';
  return text;
}

Unexpected<Error> refuse(std::string why) {
  return Unexpected<Error>(Error("metrics: " + std::move(why)));
}

}  // namespace

Result<void, Error> Registry::add(std::string_view name, std::string_view help, Labels labels,
                                  const Counter& counter) {
  std::string family(name);
  // The text format's convention (and promtool's lint): a counter's samples end in _total.
  if (!family.ends_with("_total")) family += "_total";
  return add_series(std::move(family), help, MetricType::kCounter, std::move(labels), &counter,
                    &counter);
}

Result<void, Error> Registry::add(std::string_view name, std::string_view help, Labels labels,
                                  const Gauge& gauge) {
  return add_series(std::string(name), help, MetricType::kGauge, std::move(labels), &gauge, &gauge);
}

Result<void, Error> Registry::add(std::string_view name, std::string_view help, Labels labels,
                                  const Histogram& histogram) {
  return add_series(std::string(name), help, MetricType::kHistogram, std::move(labels), &histogram,
                    &histogram);
}

Result<void, Error> Registry::add(std::string_view name, std::string_view help, Labels labels,
                                  std::span<const LatencyHistogram> shards,
                                  std::vector<double> bounds_seconds) {
  if (shards.empty()) return refuse("'" + std::string(name) + "' has no histogram shards");
  // The same clean-up as Histogram's: sorted, finite, distinct.
  std::erase_if(bounds_seconds, [](double b) { return !std::isfinite(b); });
  std::sort(bounds_seconds.begin(), bounds_seconds.end());
  bounds_seconds.erase(std::unique(bounds_seconds.begin(), bounds_seconds.end()),
                       bounds_seconds.end());
  return add_series(std::string(name), help, MetricType::kHistogram, std::move(labels),
                    LatencySeries{shards, std::move(bounds_seconds)}, shards.data());
}

Result<void, Error> Registry::add_series(std::string name, std::string_view help, MetricType type,
                                         Labels labels, Source source, const void* identity) {
  if (!Exposition::valid_metric_name(name)) {
    return refuse("'" + name + "' is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::vector<std::string> label_names;
  for (const Label& label : labels) {
    if (!Exposition::valid_label_name(label.name)) {
      return refuse("'" + label.name + "' (in " + describe(name, labels) +
                    ") is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)");
    }
    if (type == MetricType::kHistogram && label.name == "le") {
      return refuse("'le' (in " + describe(name, labels) +
                    ") is the bucket label of a histogram; choose another name");
    }
    if (std::find(label_names.begin(), label_names.end(), label.name) != label_names.end()) {
      return refuse("label '" + label.name + "' appears twice in " + describe(name, labels));
    }
    label_names.push_back(label.name);
  }
  std::lock_guard lock(mutex_);
  auto family = std::find_if(families_.begin(), families_.end(),
                             [&](const Family& f) { return f.name == name; });
  if (family == families_.end()) {
    families_.push_back(Family{name, std::string(help), type, std::move(label_names), {}});
    family = families_.end() - 1;
  } else {
    if (family->type != type) {
      return refuse("'" + name + "' is a " + type_name(family->type) + "; it cannot also be a " +
                    type_name(type));
    }
    if (family->label_names != label_names) {
      std::string expected;
      for (const auto& n : family->label_names) expected += (expected.empty() ? "" : ", ") + n;
      return refuse(describe(name, labels) + ": the series of '" + name + "' have the labels (" +
                    expected + ")");
    }
    for (const Series& series : family->series) {
      bool same = true;
      for (size_t i = 0; i < labels.size(); ++i)
        same = same && series.labels[i].value == labels[i].value;
      if (same) return refuse(describe(name, labels) + " is registered already");
    }
  }
  family->series.push_back(Series{std::move(labels), std::move(source), identity});
  return {};
}

void Registry::add_collector(std::function<void(Exposition&)> collector) {
  std::lock_guard lock(mutex_);
  collectors_.push_back(std::move(collector));
}

void Registry::remove_series(const void* identity) {
  std::lock_guard lock(mutex_);
  for (Family& family : families_) {
    std::erase_if(family.series, [identity](const Series& s) { return s.identity == identity; });
  }
  std::erase_if(families_, [](const Family& f) { return f.series.empty(); });
}

void Registry::render_family(const Family& family, Exposition& out) {
  out.family(family.name, family.type, family.help);
  for (const Series& series : family.series) {
    if (const auto* counter = std::get_if<const Counter*>(&series.source)) {
      out.sample(family.name, series.labels, (*counter)->value());
    } else if (const auto* gauge = std::get_if<const Gauge*>(&series.source)) {
      out.sample(family.name, series.labels, (*gauge)->value());
    } else if (const auto* histogram = std::get_if<const Histogram*>(&series.source)) {
      const Histogram::Snapshot snapshot = (*histogram)->snapshot();
      out.histogram(family.name, series.labels, snapshot.bounds, snapshot.cumulative, snapshot.sum);
    } else if (const auto* latency = std::get_if<LatencySeries>(&series.source)) {
      // 28 KiB: on the heap, not the scraping thread's stack.
      auto merged = std::make_unique<LatencyHistogram>();
      for (const LatencyHistogram& shard : latency->shards) merged->merge(shard);
      std::vector<uint64_t> cumulative;
      for (const double bound : latency->bounds) {
        cumulative.push_back(merged->count_at_or_below(static_cast<int64_t>(bound * 1e9)));
      }
      const uint64_t count = merged->count();
      cumulative.push_back(count);
      out.histogram(family.name, series.labels, latency->bounds, cumulative,
                    static_cast<double>(merged->sum_ns()) / 1e9);
    }
  }
}

std::string Registry::render() const {
  std::string out;
  render(out);
  return out;
}

void Registry::render(std::string& out) const {
  Exposition exposition(out);
  std::lock_guard lock(mutex_);
  for (const Family& family : families_) render_family(family, exposition);
  for (const auto& collector : collectors_) collector(exposition);
}

}  // namespace ucp::metrics
