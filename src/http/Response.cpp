#include "ucp/http/Response.h"

#include <array>
#include <cstring>
#include <stdexcept>

namespace ucp::http {

std::string_view Response::copy(std::string_view text) {
  if (text.size() <= kArenaBytes - arena_used_) {
    char* at = arena_ + arena_used_;
    if (!text.empty()) std::memcpy(at, text.data(), text.size());
    arena_used_ += text.size();
    return {at, text.size()};
  }
  overflow_.emplace_front(text);  // a node per string: earlier views stay valid
  return overflow_.front();
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

bool token_char(char c) noexcept { return kTokenChars[static_cast<unsigned char>(c)]; }

}  // namespace

void Response::add_header(std::string_view name, std::string_view value) {
  // A CR or LF from application data would let it write headers of its own (response
  // splitting): refuse rather than send it.
  if (name.empty()) throw std::invalid_argument("empty header name");
  for (const char c : name) {
    if (!token_char(c)) throw std::invalid_argument("header name is not a token");
  }
  for (const char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') {
      throw std::invalid_argument("CR, LF or NUL in a header value");
    }
  }
  // The fields the server writes itself, told apart by length first.
  switch (name.size()) {
    case 4:
      if (iequals(name, "date")) custom_date_ = true;
      break;
    case 6:
      if (iequals(name, "server")) custom_server_ = true;
      break;
    case 10:
      if (iequals(name, "connection")) {
        if (iequals(value, "close")) close_ = true;
        return;
      }
      break;
    case 14:
      if (iequals(name, "content-length")) return;
      break;
    case 17:
      if (iequals(name, "transfer-encoding")) return;
      break;
    default:
      break;
  }
  if (header_count_ == kMaxHeaders) throw std::length_error("more than Response::kMaxHeaders");
  ::new (&fields()[header_count_]) Header{copy(name), copy(value)};
  ++header_count_;
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
