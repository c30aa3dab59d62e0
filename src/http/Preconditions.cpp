#include "ucp/http/Preconditions.h"

#include <charconv>
#include <cstdio>

#include "ucp/http/HttpDate.h"
#include "ucp/http/Request.h"
#include "ucp/http/Response.h"

#include "ConditionalFields.h"
#include "TokenList.h"

namespace ucp::http {
namespace {

using detail::trim_ows;

bool weak(std::string_view tag) noexcept { return tag.substr(0, 2) == "W/"; }
std::string_view opaque(std::string_view tag) noexcept { return weak(tag) ? tag.substr(2) : tag; }

/// A date field that parses; false (and the field is ignored) otherwise.
bool field_date(std::string_view value, std::time_t& date) noexcept {
  value = trim_ows(value);
  return !value.empty() && parse_http_date(value, date);
}

/// If-Range still holds (§13.1.5): an entity tag compared strongly, or a date equal to the
/// last modification. Absent: holds.
bool if_range_holds(std::string_view value, const Validators& validators) noexcept {
  value = trim_ows(value);
  if (value.empty()) return true;
  if (value.front() == '"' || weak(value)) {
    return !weak(value) && !validators.etag.empty() && !weak(validators.etag) &&
           value == validators.etag;
  }
  std::time_t date = 0;
  return validators.last_modified != 0 && parse_http_date(value, date) &&
         date == validators.last_modified;
}

bool parse_number(std::string_view text, uint64_t& value) noexcept {
  if (text.empty()) return false;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

}  // namespace

bool entity_tag_listed(std::string_view list, std::string_view etag, bool strong) noexcept {
  return !detail::for_each_element(list, [&](std::string_view item) {
    if (item == "*") return false;  // found
    if (etag.empty()) return true;
    const bool match =
        strong ? !weak(item) && !weak(etag) && item == etag : opaque(item) == opaque(etag);
    return !match;
  });
}

detail::ConditionalFields::ConditionalFields(const Request& request) noexcept
    : method(request.method()) {
  // One pass, told apart by length first; the first field of a name counts, as in header().
  for (const Header& field : request.headers()) {
    const std::string_view name = field.name;
    switch (name.size()) {
      case 5:
        if (range.data() == nullptr && iequals(name, "range")) range = field.value;
        break;
      case 8:
        if (!present_if_match && iequals(name, "if-match")) {
          if_match = field.value;
          present_if_match = true;
        } else if (if_range.data() == nullptr && iequals(name, "if-range")) {
          if_range = field.value;
        }
        break;
      case 13:
        if (!present_if_none_match && iequals(name, "if-none-match")) {
          if_none_match = field.value;
          present_if_none_match = true;
        }
        break;
      case 17:
        if (if_modified_since.data() == nullptr && iequals(name, "if-modified-since")) {
          if_modified_since = field.value;
        }
        break;
      case 19:
        if (if_unmodified_since.data() == nullptr && iequals(name, "if-unmodified-since")) {
          if_unmodified_since = field.value;
        }
        break;
      default:
        break;
    }
  }
}

int detail::preconditions_status(const ConditionalFields& fields,
                                 const Validators& validators) noexcept {
  const bool get_or_head = fields.method == Method::kGet || fields.method == Method::kHead;
  std::time_t date = 0;
  // 1 and 2: the client's copy must still be current (lost-update prevention).
  if (fields.present_if_match) {
    if (!entity_tag_listed(fields.if_match, validators.etag, true)) return 412;
  } else if (validators.last_modified != 0 && field_date(fields.if_unmodified_since, date) &&
             validators.last_modified > date) {
    return 412;
  }
  // 3 and 4: the client's copy is current already (a cache revalidating).
  if (fields.present_if_none_match) {
    if (entity_tag_listed(fields.if_none_match, validators.etag, false)) {
      return get_or_head ? 304 : 412;
    }
  } else if (get_or_head && validators.last_modified != 0 &&
             field_date(fields.if_modified_since, date) && validators.last_modified <= date) {
    return 304;
  }
  return 0;
}

RangeDecision detail::range_decision(const ConditionalFields& fields, const Validators& validators,
                                     uint64_t size, ByteRange& range) noexcept {
  if (fields.method != Method::kGet && fields.method != Method::kHead) return RangeDecision::kWhole;
  const std::string_view value = trim_ows(fields.range);
  if (value.empty() || !if_range_holds(fields.if_range, validators)) return RangeDecision::kWhole;
  if (value.size() < 6 || !iequals(value.substr(0, 6), "bytes=")) return RangeDecision::kWhole;
  const std::string_view spec = trim_ows(value.substr(6));
  if (spec.find(',') != std::string_view::npos) return RangeDecision::kWhole;  // several
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return RangeDecision::kWhole;
  const std::string_view from = spec.substr(0, dash);
  const std::string_view to = spec.substr(dash + 1);
  if (from.empty()) {  // the last `suffix` bytes
    uint64_t suffix = 0;
    if (!parse_number(to, suffix)) return RangeDecision::kWhole;
    if (suffix == 0) return RangeDecision::kUnsatisfiable;
    if (size == 0) return RangeDecision::kWhole;  // satisfiable, but no byte to name
    range.offset = suffix >= size ? 0 : size - suffix;
    range.length = size - range.offset;
    return RangeDecision::kPartial;
  }
  uint64_t first = 0;
  uint64_t last = 0;
  if (!parse_number(from, first)) return RangeDecision::kWhole;
  if (to.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parse_number(to, last) || last < first) {
    return RangeDecision::kWhole;
  }
  if (first >= size) return RangeDecision::kUnsatisfiable;
  range.offset = first;
  range.length = (last >= size ? size - 1 : last) - first + 1;
  return RangeDecision::kPartial;
}

int evaluate_preconditions(const Request& request, const Validators& validators) noexcept {
  return detail::preconditions_status(detail::ConditionalFields(request), validators);
}

RangeDecision evaluate_range(const Request& request, const Validators& validators, uint64_t size,
                             ByteRange& range) noexcept {
  return detail::range_decision(detail::ConditionalFields(request), validators, size, range);
}

std::optional<ByteRange> answer_conditional(const Request& request, Response& response,
                                            const Validators& validators, uint64_t size) {
  if (validators.last_modified != 0) {
    char date[kHttpDateLength];
    format_http_date(validators.last_modified, date);
    response.set_header("Last-Modified", std::string_view(date, kHttpDateLength));
  }
  if (!validators.etag.empty()) response.set_header("ETag", validators.etag);
  response.set_header("Accept-Ranges", "bytes");
  const detail::ConditionalFields fields(request);
  if (const int status = detail::preconditions_status(fields, validators); status != 0) {
    response.set_status(status);
    return std::nullopt;
  }
  ByteRange range;
  switch (detail::range_decision(fields, validators, size, range)) {
    case RangeDecision::kUnsatisfiable:
      response.set_status(416);
      response.set_header("Content-Range", "bytes */" + std::to_string(size));
      return std::nullopt;
    case RangeDecision::kPartial:
      response.set_status(206);
      response.set_header("Content-Range", "bytes " + std::to_string(range.offset) + "-" +
                                               std::to_string(range.offset + range.length - 1) +
                                               "/" + std::to_string(size));
      return range;
    case RangeDecision::kWhole:
      break;
  }
  return ByteRange{0, size};
}

std::string file_entity_tag(std::time_t modified, uint64_t size) {
  char text[64];
  const int n =
      std::snprintf(text, sizeof text, "\"%llx-%llx\"", static_cast<unsigned long long>(modified),
                    static_cast<unsigned long long>(size));
  return std::string(text, static_cast<size_t>(n));
}

}  // namespace ucp::http
