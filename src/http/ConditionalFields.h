#pragma once
// The request fields that conditional requests and ranges read (If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since, If-Range, Range), gathered in one pass over the
// headers instead of one search each: StaticFiles answers every request with both
// evaluations. Private to src/http; Preconditions.h is the public face.

#include <string_view>

#include "ucp/http/Preconditions.h"
#include "ucp/http/Request.h"

namespace ucp::http::detail {

struct ConditionalFields {
  // The first field of each name; present_* when it exists (even empty).
  std::string_view if_match;
  std::string_view if_none_match;
  std::string_view if_modified_since;
  std::string_view if_unmodified_since;
  std::string_view if_range;
  std::string_view range;
  bool present_if_match = false;
  bool present_if_none_match = false;
  Method method = Method::kGet;

  explicit ConditionalFields(const Request& request) noexcept;
};

/// evaluate_preconditions() on gathered fields.
int preconditions_status(const ConditionalFields& fields, const Validators& validators) noexcept;
/// evaluate_range() on gathered fields.
RangeDecision range_decision(const ConditionalFields& fields, const Validators& validators,
                             uint64_t size, ByteRange& range) noexcept;

}  // namespace ucp::http::detail
