#include "ucp/http/Url.h"

#include <vector>

namespace ucp::http {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// pchar without '%' (RFC 3986 §3.3): unreserved, sub-delims, ':' and '@'.
bool is_path_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-._~!$&'()*+,;=:@").find(c) != std::string_view::npos;
}

void append_escape(std::string& out, char c) {
  constexpr char kHex[] = "0123456789ABCDEF";
  const auto byte = static_cast<unsigned char>(c);
  out.push_back('%');
  out.push_back(kHex[byte >> 4]);
  out.push_back(kHex[byte & 0xF]);
}

/// `path` (which starts with '/') has no segment that normalize_path would change: no empty
/// one but the last, no "." or "..". The common case, which needs no copy into segments.
bool already_normal(std::string_view path) noexcept {
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    const size_t j = i + 1;  // where the next segment starts
    if (j == path.size()) break;
    if (path[j] == '/') return false;
    if (path[j] == '.') {
      const size_t k = j + 1;
      if (k == path.size() || path[k] == '/') return false;
      if (path[k] == '.' && (k + 1 == path.size() || path[k + 1] == '/')) return false;
    }
  }
  return true;
}

}  // namespace

void append_encoded_path(std::string& out, std::string_view path) {
  for (const char c : path) {
    if (c == '/' || is_path_char(c)) {
      out.push_back(c);
    } else {
      append_escape(out, c);
    }
  }
}

void append_encoded_query(std::string& out, std::string_view query) {
  for (size_t i = 0; i < query.size(); ++i) {
    const char c = query[i];
    const bool escape = c == '%' && i + 2 < query.size() && hex_value(query[i + 1]) >= 0 &&
                        hex_value(query[i + 2]) >= 0;
    if (escape || c == '/' || c == '?' || is_path_char(c)) {
      out.push_back(c);
    } else {
      append_escape(out, c);
    }
  }
}

bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return false;
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return false;
    const char c = static_cast<char>(high * 16 + low);
    if (c == '\0') return false;
    out.push_back(c);
    i += 2;
  }
  return true;
}

void form_decode(std::string_view text, std::string& out) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out.push_back(' ');
      continue;
    }
    if (c == '%' && i + 2 < text.size()) {
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(c);
  }
}

bool normalize_path(std::string_view path, std::string& out) {
  out.clear();
  if (path.empty() || path.front() != '/') return false;
  if (already_normal(path)) {
    out.assign(path);
    return true;
  }
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string_view segment = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    const bool last = slash == std::string_view::npos;
    if (segment == "..") {
      if (segments.empty()) return false;
      segments.pop_back();
      trailing_slash = true;  // "/a/b/.." names the directory "/a/"
    } else if (segment == ".") {
      trailing_slash = true;
    } else if (segment.empty()) {
      trailing_slash = last || trailing_slash;
    } else {
      segments.push_back(segment);
      trailing_slash = false;
    }
    if (last) break;
    start = slash + 1;
  }
  out.push_back('/');
  for (size_t i = 0; i < segments.size(); ++i) {
    out.append(segments[i]);
    if (i + 1 < segments.size() || trailing_slash) out.push_back('/');
  }
  return true;
}

}  // namespace ucp::http
