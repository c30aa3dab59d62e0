#pragma once
// HTTP status codes: reason phrases and classes.

#include <string_view>

namespace ucp::http {

/// The reason phrase of `status` ("OK", "Not Found"), or "Unknown" for a code without one.
std::string_view reason_phrase(int status) noexcept;

/// Whether a response with `status` never carries content (1xx, 204, 304: RFC 9110 §6.4.1).
constexpr bool status_has_no_body(int status) noexcept {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

}  // namespace ucp::http
