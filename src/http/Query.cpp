#include "ucp/http/Query.h"

#include <charconv>
#include <limits>

#include "ucp/http/Url.h"

namespace ucp::http {

Query::Query(std::string_view text) {
  // A query longer than 4 GiB cannot reach us (the request line is bounded), but a body
  // could in principle: offsets are 32-bit, so stop there rather than wrap.
  if (text.size() > std::numeric_limits<uint32_t>::max()) {
    text = text.substr(0, std::numeric_limits<uint32_t>::max());
  }
  decoded_.reserve(text.size());
  while (!text.empty()) {
    const size_t amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    Span span{};
    span.name_at = static_cast<uint32_t>(decoded_.size());
    form_decode(pair.substr(0, eq), decoded_);
    span.name_size = static_cast<uint32_t>(decoded_.size() - span.name_at);
    span.value_at = static_cast<uint32_t>(decoded_.size());
    if (eq != std::string_view::npos) form_decode(pair.substr(eq + 1), decoded_);
    span.value_size = static_cast<uint32_t>(decoded_.size() - span.value_at);
    spans_.push_back(span);
  }
}

Query::Param Query::operator[](size_t i) const noexcept {
  const Span& s = spans_[i];
  const std::string_view all = decoded_;
  return {all.substr(s.name_at, s.name_size), all.substr(s.value_at, s.value_size)};
}

std::optional<std::string_view> Query::find(std::string_view name) const noexcept {
  for (size_t i = 0; i < spans_.size(); ++i) {
    const Param param = (*this)[i];
    if (param.name == name) return param.value;
  }
  return std::nullopt;
}

std::string_view Query::get(std::string_view name, std::string_view fallback) const noexcept {
  return find(name).value_or(fallback);
}

std::vector<std::string_view> Query::all(std::string_view name) const {
  std::vector<std::string_view> values;
  for (const Param param : *this) {
    if (param.name == name) values.push_back(param.value);
  }
  return values;
}

std::optional<int64_t> Query::get_int(std::string_view name) const noexcept {
  const auto value = find(name);
  if (!value || value->empty()) return std::nullopt;
  int64_t number = 0;
  const char* end = value->data() + value->size();
  const auto result = std::from_chars(value->data(), end, number);
  if (result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return number;
}

}  // namespace ucp::http
