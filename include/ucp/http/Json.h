#pragma once
// Json: JSON request and response bodies with nlohmann/json (Debian nlohmann-json3-dev).
//
//   router.post("/rooms", [](Request& req, Response& res) -> Task<> {
//     auto body = http::read_json(req);
//     if (!body) co_return res.text(body.error().message + "\n", 400);
//     const std::string name = body->value("name", "");
//     co_return http::json(res, {{"room", name}, {"members", 0}}, 201);
//   });
//
// Optional: the library neither needs nor links nlohmann/json, and this header is all there
// is of it (inline functions; including it without nlohmann/json installed fails with a
// message saying what to install). With CMake: find_package(nlohmann_json 3) and link
// nlohmann_json::nlohmann_json beside ucp::http; pkg-config: nlohmann_json.
//
// Why nlohmann/json and not simdjson (measured, docs/http.md "JSON"): simdjson 3.0 (Debian
// 12) parses 20-30x faster but writes no JSON, and a server mostly builds the JSON it sends;
// nlohmann/json does both with one value type. Its parse costs about 15 µs per KiB of body
// (more than a small request costs the server without it): for large bodies on a hot path,
// parse req.body() with simdjson yourself.
//
// Nothing here throws but std::bad_alloc: a malformed body is an Error (with the place), a
// string that is not UTF-8 is sent with U+FFFD in place of the bad bytes.

#if !__has_include(<nlohmann/json.hpp>)
#error "ucp/http/Json.h needs nlohmann/json (Debian: apt-get install nlohmann-json3-dev)"
#endif

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ucp/base/Result.h"
#include "ucp/http/Request.h"
#include "ucp/http/Response.h"

namespace ucp::http {

using Json = nlohmann::json;

/// Deepest nesting read_json() accepts: deeper documents are refused before parsing, so
/// that serialising or walking a parsed body recursively cannot exhaust the stack.
inline constexpr size_t kMaxJsonDepth = 256;

namespace detail {

/// The deepest nesting of arrays and objects in `text` (brackets inside strings skipped).
inline size_t json_depth(std::string_view text) noexcept {
  size_t depth = 0;
  size_t deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = ++depth > deepest ? depth : deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace detail

/// Parses `text` as one JSON document. Error: where and why it is not JSON, or too deep.
inline Result<Json, Error> parse_json(std::string_view text) {
  if (detail::json_depth(text) > kMaxJsonDepth) {
    return Unexpected{Error("JSON nested deeper than " + std::to_string(kMaxJsonDepth))};
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." without the tag.
    const std::string_view what = e.what();
    const size_t tag_end = what.find("] ");
    return Unexpected{
        Error("invalid JSON: " +
              std::string(tag_end == std::string_view::npos ? what : what.substr(tag_end + 2)))};
  }
}

/// The request's body as JSON (parse_json). Its Content-Type is not checked: see is_json().
inline Result<Json, Error> read_json(const Request& request) { return parse_json(request.body()); }

/// Whether the request says its body is JSON: application/json or a "+json" type.
inline bool is_json(const Request& request) noexcept {
  std::string_view type = request.header("content-type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  if (iequals(type, "application/json")) return true;
  return type.size() > 5 && iequals(type.substr(type.size() - 5), "+json");
}

/// One-call answer: `status` with `value` serialised as application/json.
inline void json(Response& response, const Json& value, int status = 200) noexcept {
  try {
    response.content(value.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json",
                     status);
  } catch (const std::exception&) {  // std::bad_alloc
    response.reply(500);
  }
}

}  // namespace ucp::http
