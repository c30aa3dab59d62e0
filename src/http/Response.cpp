#include "ucp/http/Response.h"

#include <array>
#include <cstring>
#include <utility>

#include "ucp/http/Status.h"

#include "ResponseEncoder.h"
#include "TokenList.h"

namespace ucp::http {

std::optional<std::string_view> Response::copy(std::string_view text) noexcept {
  if (text.size() <= kArenaBytes - arena_used_) {
    char* at = arena_ + arena_used_;
    if (!text.empty()) std::memcpy(at, text.data(), text.size());
    arena_used_ += text.size();
    return std::string_view(at, text.size());
  }
  try {
    overflow_.emplace_front(text);  // a node per string: earlier views stay valid
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
  return std::string_view(overflow_.front());
}

namespace {

constexpr auto kTokenChars = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c) {
    table[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  }
  for (const char c : std::string_view("!#$%&'*+-.^_`|~"))
    table[static_cast<unsigned char>(c)] = true;
  return table;
}();

// What a header value may not hold: a CR or LF from application data would let it write
// headers of its own (response splitting), a NUL ends it for some readers.
constexpr auto kValueStops = [] {
  std::array<bool, 256> table{};
  table['\r'] = table['\n'] = table['\0'] = true;
  return table;
}();

bool valid_name(std::string_view name) noexcept {
  bool ok = !name.empty();
  for (const char c : name) ok &= kTokenChars[static_cast<unsigned char>(c)];
  return ok;
}

bool valid_value(std::string_view value) noexcept {
  bool stop = false;
  for (const char c : value) stop |= kValueStops[static_cast<unsigned char>(c)];
  return !stop;
}

}  // namespace

bool Response::add_header(std::string_view name, std::string_view value) noexcept {
  if (!valid_name(name) || !valid_value(value)) return false;
  // The fields the server writes itself, told apart by length first.
  bool date = false;
  bool server = false;
  switch (name.size()) {
    case 4:
      date = iequals(name, "date");
      break;
    case 6:
      server = iequals(name, "server");
      break;
    case 10:
      if (iequals(name, "connection")) {
        if (iequals(value, "close")) close_ = true;
        return true;
      }
      break;
    case 14:
      if (iequals(name, "content-length")) return true;
      break;
    case 17:
      if (iequals(name, "transfer-encoding")) return true;
      break;
    default:
      break;
  }
  if (header_count_ == kMaxHeaders) return false;
  Header* field = &fields()[header_count_];
  const size_t size = name.size() + value.size();
  if (size <= kArenaBytes - arena_used_) {
    // The usual case: both into the inline arena, side by side.
    char* at = arena_ + arena_used_;
    std::memcpy(at, name.data(), name.size());
    if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
    arena_used_ += size;
    ::new (field) Header{{at, name.size()}, {at + name.size(), value.size()}};
  } else {
    const auto stored_name = copy(name);
    const auto stored_value = stored_name ? copy(value) : std::nullopt;
    if (!stored_value) return false;
    ::new (field) Header{*stored_name, *stored_value};
  }
  ++header_count_;
  custom_date_ = custom_date_ || date;
  custom_server_ = custom_server_ || server;
  return true;
}

bool Response::set_header(std::string_view name, std::string_view value) noexcept {
  Header* all = fields();
  for (uint32_t i = 0; i < header_count_; ++i) {
    if (!iequals(all[i].name, name)) continue;
    if (!valid_value(value)) return false;
    const auto stored = copy(value);
    if (!stored) return false;
    all[i].value = *stored;
    // Later fields of the same name go: one value remains.
    uint32_t kept = i + 1;
    for (uint32_t j = i + 1; j < header_count_; ++j) {
      if (!iequals(all[j].name, name)) all[kept++] = all[j];
    }
    header_count_ = kept;
    return true;
  }
  return add_header(name, value);
}

size_t Response::remove_header(std::string_view name) noexcept {
  Header* all = fields();
  uint32_t kept = 0;
  for (uint32_t i = 0; i < header_count_; ++i) {
    if (!iequals(all[i].name, name)) all[kept++] = all[i];
  }
  const size_t removed = header_count_ - kept;
  header_count_ = kept;
  if (removed > 0 && iequals(name, "date")) custom_date_ = false;
  if (removed > 0 && iequals(name, "server")) custom_server_ = false;
  return removed;
}

std::string_view Response::header(std::string_view name) const noexcept {
  for (const Header& h : headers()) {
    if (iequals(h.name, name)) return h.value;
  }
  return {};
}

void Response::set_body(std::string_view bytes) noexcept {
  borrowed_ = bytes;
  body_kind_ = BodyKind::kBorrowed;
}

std::string& Response::body_buffer() noexcept {
  body_kind_ = BodyKind::kOwned;
  return owned_;
}

void Response::set_file(UniqueFd file, uint64_t offset, uint64_t length) noexcept {
  file_ = std::move(file);
  file_offset_ = offset;
  file_length_ = length;
  body_kind_ = BodyKind::kFile;
}

std::string_view Response::body() const noexcept {
  switch (body_kind_) {
    case BodyKind::kBorrowed:
      return borrowed_;
    case BodyKind::kOwned:
      return owned_;
    default:
      return {};
  }
}

bool Response::add_vary(std::string_view field) noexcept {
  const std::string_view vary = header("vary");
  if (vary.empty()) return add_header("Vary", field);
  if (detail::has_element(vary, field) || detail::has_element(vary, "*")) return true;
  try {
    std::string list;
    list.reserve(vary.size() + 2 + field.size());
    list.append(vary).append(", ").append(field);
    return set_header("Vary", list);
  } catch (const std::bad_alloc&) {
    return false;
  }
}

void Response::content(std::string body, std::string_view content_type, int status) noexcept {
  status_ = status;
  owned_ = std::move(body);
  body_kind_ = BodyKind::kOwned;
  if (!set_content_type(content_type)) status_ = 500;
}

void Response::text(std::string body, int status) noexcept {
  content(std::move(body), "text/plain; charset=utf-8", status);
}

void Response::html(std::string body, int status) noexcept {
  content(std::move(body), "text/html; charset=utf-8", status);
}

void Response::redirect(std::string_view location, int status) noexcept {
  const bool redirecting =
      status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
  status_ = redirecting ? status : 302;
  set_body(detail::reason_line(status_));
  if (!set_header("Location", location) || !set_content_type("text/plain; charset=utf-8")) {
    remove_header("Location");
    reply(500);
  }
}

void Response::reply(int status) noexcept {
  status_ = status;
  if (status_has_no_body(status)) {
    body_kind_ = BodyKind::kNone;
    return;
  }
  // The phrase and a newline, static text: no allocation.
  const std::string_view line = detail::reason_line(status);
  set_body(line.empty() ? std::string_view("\n") : line);
  (void)set_content_type("text/plain; charset=utf-8");
}

void Response::switch_protocols(UpgradeHandler handler, UpgradeKeep keep) noexcept {
  status_ = 101;
  upgrade_ = std::move(handler);
  upgrade_keep_ = keep;
}

void Response::reset() noexcept {
  status_ = 200;
  upgrade_ = {};
  upgrade_keep_ = UpgradeKeep::kUntilReturn;
  body_kind_ = BodyKind::kNone;
  close_ = custom_date_ = custom_server_ = head_sent_ = false;
  header_count_ = 0;
  arena_used_ = 0;
  borrowed_ = {};
  owned_.clear();
  file_.reset();
  file_offset_ = file_length_ = 0;
  stream_length_ = kUnknownLength;
  stream_sent_ = 0;
  overflow_.clear();
}

}  // namespace ucp::http
