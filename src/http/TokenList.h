#pragma once
// Comma-separated header values (RFC 9110 §5.6.1: "#rule" lists): "gzip, deflate;q=0.5",
// "Origin, Accept-Encoding", "content-type,x-token". Empty elements (", ,") are skipped, as
// the RFC asks of a recipient. Private to src/http.

#include <string_view>

#include "ucp/http/Request.h"

namespace ucp::http::detail {

/// `text` without leading and trailing spaces and tabs.
constexpr std::string_view trim_ows(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

/// Calls `visit(element)` for every non-empty element of `list`, trimmed; stops early when
/// `visit` returns false. Returns false if it stopped early.
template <class Visit>
bool for_each_element(std::string_view list, Visit&& visit) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view element = trim_ows(list.substr(0, comma));
    if (!element.empty() && !visit(element)) return false;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return true;
}

/// Whether `list` has the element `token` (ASCII case-insensitive; parameters after ';' are
/// not part of the comparison: "no-transform" is in "max-age=0, no-transform").
inline bool has_element(std::string_view list, std::string_view token) {
  return !for_each_element(list, [token](std::string_view element) {
    const size_t semicolon = element.find(';');
    return !iequals(trim_ows(element.substr(0, semicolon)), token);
  });
}

}  // namespace ucp::http::detail
