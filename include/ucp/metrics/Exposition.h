#pragma once
// Exposition: writes the Prometheus text exposition format (version 0.0.4, what
// `promtool check metrics` and every Prometheus server read) into a string. Registry renders
// through it; a collector (Registry::add_collector) writes its own families with it.
//
//   # HELP ucp_requests_total Requests served.
//   # TYPE ucp_requests_total counter
//   ucp_requests_total{code="200"} 1027
//
// It escapes help text (\\, \n) and label values (\\, \", \n) and formats numbers as
// Prometheus parses them (integers exact, +Inf, -Inf, NaN); it does not check names (Registry
// does; a collector's names are its own). Not thread-safe: one writer, one string.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ucp::metrics {

/// The Content-Type of a scrape answer.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

struct Label {
  std::string name;
  std::string value;
};
using Labels = std::vector<Label>;

enum class MetricType { kCounter, kGauge, kHistogram };

class Exposition {
 public:
  explicit Exposition(std::string& out) noexcept : out_(out) {}

  /// The HELP and TYPE lines that precede a family's samples.
  void family(std::string_view name, MetricType type, std::string_view help);
  /// One sample line; `extra` is one more label after `labels` (a histogram's `le`).
  void sample(std::string_view name, const Labels& labels, double value,
              const Label* extra = nullptr);
  void sample(std::string_view name, const Labels& labels, uint64_t value,
              const Label* extra = nullptr);
  /// A histogram series: one `NAME_bucket` line per bound and +Inf (`le`, cumulative counts:
  /// `cumulative` has bounds.size() + 1 entries), `NAME_sum`, `NAME_count`.
  void histogram(std::string_view name, const Labels& labels, std::span<const double> bounds,
                 std::span<const uint64_t> cumulative, double sum);

  /// [a-zA-Z_:][a-zA-Z0-9_:]*
  static bool valid_metric_name(std::string_view name) noexcept;
  /// [a-zA-Z_][a-zA-Z0-9_]*, and not reserved (a leading "__").
  static bool valid_label_name(std::string_view name) noexcept;
  /// How a number appears in the exposition (shortest round-trip form; +Inf, -Inf, NaN).
  static std::string format_value(double value);

 private:
  void series_name(std::string_view name, const Labels& labels, const Label* extra);

  std::string& out_;
};

}  // namespace ucp::metrics
