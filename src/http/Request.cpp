#include "ucp/http/Request.h"

#include <array>
#include <cstring>

#include "ucp/http/Url.h"

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

std::optional<std::string> Request::decoded_param(std::string_view name) const {
  std::string decoded;
  if (!percent_decode(param(name), decoded)) return std::nullopt;
  return decoded;
}

std::optional<std::string_view> Request::find_param(std::string_view name) const noexcept {
  for (uint32_t i = 0; i < param_count_; ++i) {
    if (params_[i].name == name) return params_[i].value;
  }
  return std::nullopt;
}

bool Request::set_id(std::string_view id) noexcept {
  if (id.size() > kMaxIdBytes) return false;
  if (!id.empty()) std::memcpy(id_, id.data(), id.size());
  id_size_ = static_cast<uint32_t>(id.size());
  return true;
}

}  // namespace ucp::http
