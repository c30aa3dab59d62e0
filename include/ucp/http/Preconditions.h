#pragma once
// Preconditions: conditional requests (RFC 9110 §13: If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since, If-Range) and single byte ranges (§14: Range) for any
// representation a handler serves, a file or bytes of its own. StaticFiles uses them; so can
// a handler that serves, say, a document from a database with a version number:
//
//   const std::string tag = "\"v" + std::to_string(doc.version) + "\"";
//   const http::Validators validators{.etag = tag, .last_modified = doc.updated};
//   const auto part = http::answer_conditional(req, res, validators, doc.bytes.size());
//   if (!part) co_return;                        // 304, 412 or 416: the status says it all
//   res.set_content_type("application/pdf");
//   res.body_buffer() = doc.bytes.substr(part->offset, part->length);   // 200 or 206
//
// Thread contract: none (functions of their arguments).

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace ucp::http {

class Request;
class Response;

/// What identifies the current version of a representation.
struct Validators {
  /// Its entity tag as ETag sends it: "\"xyz\"" (strong) or "W/\"xyz\"" (weak); "" = none.
  std::string_view etag = {};
  /// Its last modification, seconds since the epoch; 0 = unknown.
  std::time_t last_modified = 0;
};

/// RFC 9110 §13.2.2, in its order: If-Match (strong comparison; "*" matches), else
/// If-Unmodified-Since; then If-None-Match (weak comparison; "*" matches), else
/// If-Modified-Since (GET and HEAD only). A date that does not parse, or one compared with an
/// unknown last modification, is ignored.
/// Returns 0 (go on and answer), 304 (Not Modified; for GET and HEAD) or 412 (Precondition
/// Failed).
int evaluate_preconditions(const Request& request, const Validators& validators) noexcept;

/// Bytes of a representation: `length` of them from `offset`.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

enum class RangeDecision : uint8_t {
  kWhole,          // answer 200 with the whole representation
  kPartial,        // answer 206 with `range`
  kUnsatisfiable,  // answer 416 with "Content-Range: bytes */SIZE"
};

/// RFC 9110 §14.2 for a representation of `size` bytes: one "bytes=first-last",
/// "bytes=first-" or "bytes=-suffix" in Range, on GET and HEAD, applies when If-Range (if
/// present) still holds: the same strong entity tag, or exactly the last modification date.
/// kWhole for no Range, another unit, several ranges (the whole representation is a valid
/// answer to them), malformed syntax, an If-Range that no longer holds, or an empty
/// representation's suffix range.
RangeDecision evaluate_range(const Request& request, const Validators& validators, uint64_t size,
                             ByteRange& range) noexcept;

/// Both of the above and their answer's head: ETag, Last-Modified and "Accept-Ranges: bytes"
/// (whatever the outcome); then 304 or 412 (no body), 416 with Content-Range, or 206 with
/// Content-Range. Returns the bytes to send (all of them for a 200, the range for a 206),
/// or nullopt when the status is the whole answer.
std::optional<ByteRange> answer_conditional(const Request& request, Response& response,
                                            const Validators& validators, uint64_t size);

/// A strong entity tag for a file: its modification time and size in hex, quoted
/// ("\"6560c2a1-1f4\"", nginx's form, so that caches see the same validator from either).
std::string file_entity_tag(std::time_t modified, uint64_t size);

/// Whether `list` (an If-Match or If-None-Match value) names `etag`: "*" always does;
/// `strong`: both tags strong and equal (§8.8.3.2), else equal after dropping "W/".
bool entity_tag_listed(std::string_view list, std::string_view etag, bool strong) noexcept;

}  // namespace ucp::http
