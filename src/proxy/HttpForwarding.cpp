#include "HttpForwarding.h"

#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstring>

#include <arpa/inet.h>

#include "ucp/http/Status.h"

namespace ucp::proxy::detail {
namespace {

using namespace std::string_view_literals;

using http::iequals;

/// Calls `f(token)` for each element of a comma-separated list, skipping empty ones; stops
/// when `f` returns true, and returns whether it did.
template <class F>
bool any_token(std::string_view list, F&& f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view token = list.substr(0, comma);
    const size_t first = token.find_first_not_of(" \t");
    token = first == std::string_view::npos
                ? std::string_view()
                : token.substr(first, token.find_last_not_of(" \t") - first + 1);
    if (!token.empty() && f(token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  // One growth of the string for the line, then copies into it (four appends check and grow
  // it four times).
  const size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  std::memcpy(p, ": ", 2);
  p += 2;
  if (!value.empty()) std::memcpy(p, value.data(), value.size());
  p += value.size();
  std::memcpy(p, "\r\n", 2);
}

/// Copies `n` bytes, inline up to 32 (a head's pieces are mostly a few bytes long: a call to
/// memcpy costs more than such a copy). Overlapping fixed-size moves, each inside [from, from+n)
/// and [to, to+n).
[[gnu::noinline]] void copy_long(char* to, const char* from, size_t n) noexcept {
  std::memcpy(to, from, n);
}

inline void copy_piece(char* to, const char* from, size_t n) noexcept {
  if (n > 32) {
    copy_long(to, from, n);
  } else if (n >= 16) {
    uint64_t a, b, c, d;
    std::memcpy(&a, from, 8);
    std::memcpy(&b, from + 8, 8);
    std::memcpy(&c, from + n - 16, 8);
    std::memcpy(&d, from + n - 8, 8);
    std::memcpy(to, &a, 8);
    std::memcpy(to + 8, &b, 8);
    std::memcpy(to + n - 16, &c, 8);
    std::memcpy(to + n - 8, &d, 8);
  } else if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, from, 8);
    std::memcpy(&b, from + n - 8, 8);
    std::memcpy(to, &a, 8);
    std::memcpy(to + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, from, 4);
    std::memcpy(&b, from + n - 4, 4);
    std::memcpy(to, &a, 4);
    std::memcpy(to + n - 4, &b, 4);
  } else if (n > 0) {
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
}

/// Writes a head into room grown once up front (one growth and one fill for the whole head,
/// instead of a capacity check and a growth per piece); the string is cut to what was written
/// at the end. `room` must bound every byte written.
class HeadWriter {
 public:
  HeadWriter(std::string& out, size_t room) : out_(out) {
    const size_t at = out.size();
    out.resize(at + room);
    p_ = out.data() + at;
  }
  HeadWriter(const HeadWriter&) = delete;
  HeadWriter& operator=(const HeadWriter&) = delete;
  ~HeadWriter() {
    assert(p_ <= out_.data() + out_.size());  // the room was enough
    out_.resize(static_cast<size_t>(p_ - out_.data()));
  }

  HeadWriter& put(std::string_view text) noexcept {
    copy_piece(p_, text.data(), text.size());
    p_ += text.size();
    return *this;
  }
  HeadWriter& put(char c) noexcept {
    *p_++ = c;
    return *this;
  }
  HeadWriter& end_line() noexcept {
    p_[0] = '\r';
    p_[1] = '\n';
    p_ += 2;
    return *this;
  }
  void field(std::string_view name, std::string_view value) noexcept {
    put(name);
    p_[0] = ':';
    p_[1] = ' ';
    p_ += 2;
    put(value).end_line();
  }

 private:
  std::string& out_;
  char* p_ = nullptr;
};

/// The room every field line of `fields` takes ("name: value\r\n").
size_t fields_room(std::span<const http::Header> fields) noexcept {
  size_t room = 0;
  for (const http::Header& field : fields) room += field.name.size() + field.value.size() + 4;
  return room;
}

/// `value` in decimal, written into `digits`.
template <class T>
std::string_view decimal(T value, std::array<char, 32>& digits) noexcept {
  const auto written = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  return {digits.data(), static_cast<size_t>(written.ptr - digits.data())};
}

/// `name` equals `lower` (lower case letters and '-') but for the case of its letters.
bool same_name(std::string_view name, std::string_view lower) noexcept {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < lower.size(); ++i) {
    const char l = lower[i];
    const char c = l >= 'a' && l <= 'z' ? static_cast<char>(name[i] | 0x20) : name[i];
    if (c != l) return false;
  }
  return true;
}

}  // namespace

FieldName classify(std::string_view name) noexcept {
  // One comparison at most: the length picks the candidate (or the two).
  auto is = [name](std::string_view lower, FieldName kind) {
    return same_name(name, lower) ? kind : FieldName::kOther;
  };
  switch (name.size()) {
    case 2:
      return is("te", FieldName::kTe);
    case 4:
      return is("host", FieldName::kHost);
    case 6:
      return is("expect", FieldName::kExpect);
    case 7:
      return is("upgrade", FieldName::kUpgrade);
    case 9:
      return is("forwarded", FieldName::kForwarded);
    case 10: {
      const char first = static_cast<char>(name.front() | 0x20);
      if (first == 'c') return is("connection", FieldName::kConnection);
      if (first == 'k') return is("keep-alive", FieldName::kKeepAlive);
      return FieldName::kOther;
    }
    case 14:
      return is("content-length", FieldName::kContentLength);
    case 15:
      return is("x-forwarded-for", FieldName::kXForwardedFor);
    case 16:
      return is("proxy-connection", FieldName::kProxyConnection);
    case 17: {
      const char first = static_cast<char>(name.front() | 0x20);
      if (first == 't') return is("transfer-encoding", FieldName::kTransferEncoding);
      if (first == 'x') return is("x-forwarded-proto", FieldName::kXForwardedProto);
      return FieldName::kOther;
    }
    default:
      return FieldName::kOther;
  }
}

bool is_hop_by_hop(FieldName kind) noexcept {
  switch (kind) {
    case FieldName::kConnection:
    case FieldName::kProxyConnection:
    case FieldName::kKeepAlive:
    case FieldName::kTe:
    case FieldName::kTransferEncoding:
    case FieldName::kUpgrade:
      return true;
    default:
      return false;
  }
}

HopByHop::HopByHop(std::span<const http::Header> fields) noexcept : fields_(fields) {
  for (const http::Header& field : fields_) {
    if (field.name.size() != 10 || !iequals(field.name, "connection")) continue;
    if (connection_count_ == kMaxConnectionFields) {
      more_ = true;
      break;
    }
    connection_[connection_count_++] = field.value;
  }
}

bool HopByHop::contains(std::string_view name) const noexcept {
  return contains(name, classify(name));
}

bool HopByHop::contains(std::string_view name, FieldName kind) const noexcept {
  if (kind == FieldName::kHost) return false;
  if (is_hop_by_hop(kind)) return true;
  return connection_count_ != 0 && connection_lists(name);
}

bool HopByHop::connection_lists(std::string_view token) const noexcept {
  auto listed = [token](std::string_view list) {
    return any_token(list, [token](std::string_view t) { return iequals(t, token); });
  };
  if (more_) {
    for (const http::Header& field : fields_) {
      if (iequals(field.name, "connection") && listed(field.value)) return true;
    }
    return false;
  }
  for (size_t i = 0; i < connection_count_; ++i) {
    if (listed(connection_[i])) return true;
  }
  return false;
}

std::string client_ip(const InetAddress& client) {
  char text[INET6_ADDRSTRLEN] = "";
  if (client.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(client.get());
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
  } else if (client.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(client.get());
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      ::inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    }
  } else {
    return "unknown";  // RFC 7239's word for it
  }
  return text;
}

bool is_websocket_upgrade(const http::Request& request) noexcept {
  if (request.method() != http::Method::kGet) return false;
  const bool websocket = any_token(request.header("upgrade"),
                                   [](std::string_view t) { return iequals(t, "websocket"); });
  return websocket && HopByHop(request.headers()).connection_lists("upgrade");
}

void append_upstream_head(std::string& out, const UpstreamHead& head) {
  const http::Request& request = head.request;
  std::array<char, 32> digits;
  const std::string_view target = request.target();
  const std::string_view host = request.host();
  const std::string_view upgrade = head.websocket ? request.header("upgrade") : std::string_view();
  // Every piece below, each field counted whole (the joined ones are shorter), and the fixed
  // text of the lines this adds (under 256 bytes).
  HeadWriter w(out, request.method_name().size() + target.size() + request.path().size() +
                        request.query().size() + 2 * host.size() + 2 * head.client_ip.size() +
                        2 * head.proto.size() + upgrade.size() + fields_room(request.headers()) +
                        256);
  w.put(request.method_name()).put(' ');
  if (!target.empty() && target.front() != '/' && target != "*") {  // absolute-form
    w.put(request.path());
    if (!request.query().empty()) w.put('?').put(request.query());
  } else {
    w.put(target);
  }
  w.put(" HTTP/1.1\r\nHost: "sv).put(host).end_line();
  const HopByHop hop(request.headers());
  bool forwarded_for = false;
  bool forwarded = false;
  for (const http::Header& field : request.headers()) {
    const std::string_view name = field.name;
    const FieldName kind = classify(name);
    if (kind == FieldName::kHost || hop.contains(name, kind) || kind == FieldName::kContentLength ||
        kind == FieldName::kExpect || kind == FieldName::kXForwardedProto) {
      continue;
    }
    // Joined below, with the client added.
    if (kind == FieldName::kXForwardedFor) {
      forwarded_for = true;
      continue;
    }
    if (kind == FieldName::kForwarded) {
      forwarded = true;
      continue;
    }
    w.field(name, field.value);
  }
  // What came in (every field of the name, in order), then this hop's.
  auto join = [&](FieldName kind, bool present) {
    if (!present) return;
    for (const http::Header& field : request.headers()) {
      if (classify(field.name) == kind && !hop.contains(field.name, kind)) {
        w.put(field.value).put(", "sv);
      }
    }
  };
  w.put("X-Forwarded-For: "sv);
  join(FieldName::kXForwardedFor, forwarded_for);
  w.put(head.client_ip).put("\r\nX-Forwarded-Proto: "sv).put(head.proto);
  w.put("\r\nForwarded: "sv);
  join(FieldName::kForwarded, forwarded);
  w.put("for="sv);
  if (head.client_ip.find(':') != std::string_view::npos) {
    w.put("\"["sv).put(head.client_ip).put("]\""sv);
  } else {
    w.put(head.client_ip);
  }
  w.put(";proto="sv).put(head.proto);
  if (!host.empty()) w.put(";host=\""sv).put(host).put('"');
  w.end_line();
  if (head.framing == http::BodyFraming::kLength) {
    w.field("Content-Length", decimal(head.content_length, digits));
  } else if (head.framing == http::BodyFraming::kChunked) {
    w.field("Transfer-Encoding", "chunked");
  }
  if (head.websocket) {
    w.field("Connection", "Upgrade");
    w.field("Upgrade", upgrade);
  }
  w.end_line();
}

ClientFraming client_framing(const http::ResponseHead& head, int client_minor) noexcept {
  switch (head.framing) {
    case http::BodyFraming::kNone:
      return ClientFraming::kNone;
    case http::BodyFraming::kLength:
      return ClientFraming::kLength;
    case http::BodyFraming::kChunked:
    case http::BodyFraming::kUntilClose:
      break;
  }
  return client_minor >= 1 ? ClientFraming::kChunked : ClientFraming::kUntilClose;
}

void append_client_head(std::string& out, const ClientHead& head) {
  const http::ResponseHead& response = head.response;
  std::array<char, 32> digits;
  const std::string_view reason =
      response.reason.empty() ? http::reason_phrase(response.status) : response.reason;
  const std::string_view upgrade = head.upgrade ? response.header("upgrade") : std::string_view();
  // The status line, every field counted whole, and the fixed text of the lines this adds
  // (under 128 bytes, the status and the length included).
  HeadWriter w(out, reason.size() + upgrade.size() + fields_room(response.headers) + 128);
  w.put("HTTP/1.1 "sv).put(decimal(response.status, digits)).put(' ').put(reason).end_line();
  // A response without a body (to HEAD, a 304) keeps the Content-Length it announces.
  const bool keep_length =
      head.framing == ClientFraming::kNone && response.status >= 200 && response.status != 204;
  const HopByHop hop(response.headers);
  for (const http::Header& field : response.headers) {
    const FieldName kind = classify(field.name);
    if (hop.contains(field.name, kind)) continue;
    if (kind == FieldName::kContentLength && !keep_length) continue;
    w.field(field.name, field.value);
  }
  if (head.framing == ClientFraming::kLength) {
    w.field("Content-Length", decimal(response.content_length, digits));
  } else if (head.framing == ClientFraming::kChunked) {
    w.field("Transfer-Encoding", "chunked");
  }
  if (head.upgrade) {
    w.field("Connection", "Upgrade");
    w.field("Upgrade", upgrade);
  } else if (!head.keep_alive) {
    w.field("Connection", "close");
  } else if (head.client_minor == 0) {
    w.field("Connection", "keep-alive");
  }
  w.end_line();
}

void append_status_response(std::string& out, int status, bool keep_alive, int client_minor) {
  const std::string_view reason = http::reason_phrase(status);
  std::string body = std::to_string(status);
  body.append(" ").append(reason).append("\n");
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(reason).append("\r\n");
  append_field(out, "Content-Type", "text/plain");
  append_field(out, "Content-Length", std::to_string(body.size()));
  if (!keep_alive) {
    append_field(out, "Connection", "close");
  } else if (client_minor == 0) {
    append_field(out, "Connection", "keep-alive");
  }
  out.append("\r\n").append(body);
}

}  // namespace ucp::proxy::detail
