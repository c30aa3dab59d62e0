#pragma once
// HTTP status codes: reason phrases and classes.

#include <string_view>

namespace ucp::http {

/// The reason phrase of `status` as the IANA registry names it ("OK", "Upgrade Required"), or
/// "" for a code it does not name (the status line then ends after the code and its space,
/// which RFC 9112 §4 allows: clients ignore the phrase).
std::string_view reason_phrase(int status) noexcept;

/// Whether a response with `status` never carries content (1xx, 204, 304: RFC 9110 §6.4.1).
constexpr bool status_has_no_body(int status) noexcept {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

}  // namespace ucp::http
