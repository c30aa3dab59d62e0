#pragma once
// HTTP dates (RFC 9110 §5.6.7): formatting in IMF-fixdate, parsing all three formats a
// server must accept, and the Date header value cached per thread.

#include <ctime>
#include <string>
#include <string_view>

namespace ucp::http {

/// "Sun, 06 Nov 1994 08:49:37 GMT". `out` must hold kHttpDateLength bytes.
inline constexpr size_t kHttpDateLength = 29;
void format_http_date(std::time_t time, char* out) noexcept;
std::string format_http_date(std::time_t time);

/// Parses an IMF-fixdate, an RFC 850 date or an asctime() date; false when `text` is none.
bool parse_http_date(std::string_view text, std::time_t& time) noexcept;

/// The current time as an IMF-fixdate, formatted at most once per second per thread (each
/// loop thread answers with its own copy; no lock, no syscall but a vDSO clock read).
std::string_view cached_http_date() noexcept;

}  // namespace ucp::http
