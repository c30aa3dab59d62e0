#include "ucp/metrics/Exposition.h"

#include <charconv>
#include <cmath>

namespace ucp::metrics {
namespace {

bool name_char(char c, bool first, bool colon) noexcept {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return letter || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

void Exposition::family(std::string_view name, MetricType type, std::string_view help) {
  out_.append("# HELP ").append(name).append(" ");
  append_escaped(out_, help, false);
  out_.append("\n# TYPE ").append(name).append(" ");
  switch (type) {
    case MetricType::kCounter:
      out_.append("counter\n");
      break;
    case MetricType::kGauge:
      out_.append("gauge\n");
      break;
    case MetricType::kHistogram:
      out_.append("histogram\n");
      break;
  }
}

void Exposition::series_name(std::string_view name, const Labels& labels, const Label* extra) {
  out_.append(name);
  if (labels.empty() && extra == nullptr) return;
  out_ += '{';
  bool first = true;
  auto label = [&](const Label& l) {
    if (!first) out_ += ',';
    first = false;
    out_.append(l.name).append("=\"");
    append_escaped(out_, l.value, true);
    out_ += '"';
  };
  for (const Label& l : labels) label(l);
  if (extra != nullptr) label(*extra);
  out_ += '}';
}

void Exposition::sample(std::string_view name, const Labels& labels, double value,
                        const Label* extra) {
  series_name(name, labels, extra);
  out_.append(" ").append(format_value(value)).append("\n");
}

void Exposition::sample(std::string_view name, const Labels& labels, uint64_t value,
                        const Label* extra) {
  series_name(name, labels, extra);
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out_.append(" ").append(digits, end).append("\n");
}

void Exposition::histogram(std::string_view name, const Labels& labels,
                           std::span<const double> bounds, std::span<const uint64_t> cumulative,
                           double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  Label le{"le", ""};
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i) {
    le.value = format_value(bounds[i]);
    sample(bucket, labels, cumulative[i], &le);
  }
  const uint64_t count = cumulative.empty() ? 0 : cumulative.back();
  le.value = "+Inf";
  sample(bucket, labels, count, &le);
  sample(std::string(name) + "_sum", labels, sum);
  sample(std::string(name) + "_count", labels, count);
}

bool Exposition::valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, true)) return false;
  }
  return true;
}

bool Exposition::valid_label_name(std::string_view name) noexcept {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, false)) return false;
  }
  return true;
}

std::string Exposition::format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits; plain decimals from 1e-4 to 1e21 (0.0001, not 1e-04; byte
  // counts as integers), exponent notation beyond.
  char text[64];
  const auto scientific =
      std::to_chars(text, text + sizeof text, value, std::chars_format::scientific).ptr;
  const std::string_view digits(text, static_cast<size_t>(scientific - text));
  size_t at = digits.find('e') + 1;
  if (digits[at] == '+') ++at;  // from_chars takes '-' but not '+'
  int exponent = 0;
  std::from_chars(digits.data() + at, digits.data() + digits.size(), exponent);
  if (exponent < -4 || exponent >= 21) return std::string(digits);
  const auto fixed = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed).ptr;
  return std::string(text, fixed);
}

}  // namespace ucp::metrics
