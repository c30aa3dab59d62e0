#include "ucp/http/Request.h"

#include <array>

namespace ucp::http {
namespace {

constexpr std::array<std::string_view, kMethodCount> kMethodNames = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "OTHER"};

constexpr char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

std::string_view to_string(Method method) noexcept {
  return kMethodNames[static_cast<size_t>(method)];
}

Method method_from_string(std::string_view token) noexcept {
  for (size_t i = 0; i + 1 < kMethodNames.size(); ++i) {
    if (kMethodNames[i] == token) return static_cast<Method>(i);
  }
  return Method::kOther;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view Request::header(std::string_view name) const noexcept {
  const Header* fields = this->fields();
  for (uint32_t i = 0; i < header_count_; ++i) {
    if (iequals(fields[i].name, name)) return fields[i].value;
  }
  return {};
}

bool Request::has_header(std::string_view name) const noexcept {
  const Header* fields = this->fields();
  for (uint32_t i = 0; i < header_count_; ++i) {
    if (iequals(fields[i].name, name)) return true;
  }
  return false;
}

std::string_view Request::param(std::string_view name) const noexcept {
  for (uint32_t i = 0; i < param_count_; ++i) {
    if (params_[i].name == name) return params_[i].value;
  }
  return {};
}

}  // namespace ucp::http
