#include "ucp/http/HttpRequestParser.h"

#include <algorithm>
#include <charconv>

namespace ucp::http {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

bool is_token_char(char c) noexcept {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool has_token(std::string_view list, std::string_view token) noexcept {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (iequals(trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

ParseStatus parse_request(std::string_view data, size_t max_head_bytes, size_t max_body_bytes,
                          Request& request) {
  size_t head_end = data.find("\r\n\r\n");
  // A bare LF line ending (RFC 9112 §2.2 allows rejecting it) would otherwise leave the
  // request waiting for a CRLF CRLF that never comes: answer 400 at once.
  size_t scan_end = head_end == std::string_view::npos ? data.size() : head_end;
  for (size_t lf = data.find('\n'); lf != std::string_view::npos && lf < scan_end;
       lf = data.find('\n', lf + 1)) {
    if (lf == 0 || data[lf - 1] != '\r') return ParseStatus::kBadRequest;
  }
  if (head_end == std::string_view::npos) {
    return data.size() > max_head_bytes ? ParseStatus::kHeaderTooLarge : ParseStatus::kIncomplete;
  }
  if (head_end + 4 > max_head_bytes) return ParseStatus::kHeaderTooLarge;
  std::string_view head = data.substr(0, head_end);

  // Request line: METHOD SP target SP HTTP/1.x
  size_t line_end = head.find("\r\n");
  std::string_view line = head.substr(0, line_end);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1) return ParseStatus::kBadRequest;
  request = Request{};
  request.method = line.substr(0, sp1);
  request.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!std::all_of(request.method.begin(), request.method.end(), is_token_char)) {
    return ParseStatus::kBadRequest;
  }
  if (request.target.find_first_of(" \t\r\n") != std::string_view::npos) {
    return ParseStatus::kBadRequest;
  }
  if (version == "HTTP/1.1") {
    request.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request.minor_version = 0;
    request.keep_alive = false;
  } else {
    return ParseStatus::kBadRequest;
  }

  bool have_length = false;
  bool have_transfer_encoding = false;
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    size_t end = rest.find("\r\n");
    std::string_view field = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    size_t colon = field.find(':');
    // No colon, empty name, whitespace before the colon or obs-fold: 400 (RFC 9112 §5).
    if (colon == std::string_view::npos || colon == 0) return ParseStatus::kBadRequest;
    std::string_view name = field.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return ParseStatus::kBadRequest;
    std::string_view value = trim(field.substr(colon + 1));
    if (value.find_first_of("\r\n", 0) != std::string_view::npos ||
        value.find('\0') != std::string_view::npos) {
      return ParseStatus::kBadRequest;
    }
    if (iequals(name, "content-length")) {
      size_t length = 0;
      if (value.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return ParseStatus::kBadRequest;  // "+5", "-1", "0x10", "42, 42", ""
      }
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec != std::errc() || ptr != value.data() + value.size()) return ParseStatus::kBadRequest;
      if (have_length && length != request.content_length) return ParseStatus::kBadRequest;
      have_length = true;
      request.content_length = length;
    } else if (iequals(name, "transfer-encoding")) {
      have_transfer_encoding = true;
    } else if (iequals(name, "connection")) {
      if (has_token(value, "close")) request.keep_alive = false;
      if (has_token(value, "keep-alive")) request.keep_alive = true;
    }
  }
  if (have_transfer_encoding) {
    // TE together with CL is a smuggling vector: always 400. TE alone: not supported yet.
    return have_length ? ParseStatus::kBadRequest : ParseStatus::kNotImplemented;
  }
  if (request.content_length > max_body_bytes) return ParseStatus::kBodyTooLarge;
  size_t head_bytes = head_end + 4;
  if (request.content_length > data.size() - head_bytes) return ParseStatus::kIncomplete;
  request.total_bytes = head_bytes + request.content_length;
  return ParseStatus::kComplete;
}

}  // namespace ucp::http
