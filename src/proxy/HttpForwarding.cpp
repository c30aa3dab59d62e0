#include "HttpForwarding.h"

#include <charconv>
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

/// `value` in decimal, written into `digits`.
template <class T>
std::string_view decimal(T value, std::array<char, 24>& digits) noexcept {
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
  std::array<char, 24> digits;
  std::string_view target = request.target();
  out.append(request.method_name()).append(" "sv);
  if (!target.empty() && target.front() != '/' && target != "*") {  // absolute-form
    out.append(request.path());
    if (!request.query().empty()) out.append("?"sv).append(request.query());
  } else {
    out.append(target);
  }
  out.append(" HTTP/1.1\r\nHost: "sv).append(request.host()).append("\r\n"sv);
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
    append_field(out, name, field.value);
  }
  // What came in (every field of the name, in order), then this hop's.
  // (The literals of neighbouring lines go in one append.)
  auto join = [&](FieldName kind, bool present) {
    if (!present) return;
    for (const http::Header& field : request.headers()) {
      if (classify(field.name) == kind && !hop.contains(field.name, kind)) {
        out.append(field.value).append(", "sv);
      }
    }
  };
  out.append("X-Forwarded-For: "sv);
  join(FieldName::kXForwardedFor, forwarded_for);
  out.append(head.client_ip).append("\r\nX-Forwarded-Proto: "sv).append(head.proto);
  out.append("\r\nForwarded: "sv);
  join(FieldName::kForwarded, forwarded);
  out.append("for="sv);
  if (head.client_ip.find(':') != std::string_view::npos) {
    out.append("\"["sv).append(head.client_ip).append("]\""sv);
  } else {
    out.append(head.client_ip);
  }
  out.append(";proto="sv).append(head.proto);
  if (!request.host().empty()) {
    out.append(";host=\""sv).append(request.host()).append("\"\r\n"sv);
  } else {
    out.append("\r\n"sv);
  }
  if (head.framing == http::BodyFraming::kLength) {
    append_field(out, "Content-Length", decimal(head.content_length, digits));
  } else if (head.framing == http::BodyFraming::kChunked) {
    append_field(out, "Transfer-Encoding", "chunked");
  }
  if (head.websocket) {
    append_field(out, "Connection", "Upgrade");
    append_field(out, "Upgrade", request.header("upgrade"));
  }
  out.append("\r\n"sv);
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
  std::array<char, 24> digits;
  const std::string_view reason =
      response.reason.empty() ? http::reason_phrase(response.status) : response.reason;
  out.append("HTTP/1.1 "sv).append(decimal(response.status, digits)).append(" "sv).append(reason);
  out.append("\r\n"sv);
  // A response without a body (to HEAD, a 304) keeps the Content-Length it announces.
  const bool keep_length =
      head.framing == ClientFraming::kNone && response.status >= 200 && response.status != 204;
  const HopByHop hop(response.headers);
  for (const http::Header& field : response.headers) {
    const FieldName kind = classify(field.name);
    if (hop.contains(field.name, kind)) continue;
    if (kind == FieldName::kContentLength && !keep_length) continue;
    append_field(out, field.name, field.value);
  }
  if (head.framing == ClientFraming::kLength) {
    append_field(out, "Content-Length", decimal(response.content_length, digits));
  } else if (head.framing == ClientFraming::kChunked) {
    append_field(out, "Transfer-Encoding", "chunked");
  }
  if (head.upgrade) {
    append_field(out, "Connection", "Upgrade");
    append_field(out, "Upgrade", response.header("upgrade"));
  } else if (!head.keep_alive) {
    append_field(out, "Connection", "close");
  } else if (head.client_minor == 0) {
    append_field(out, "Connection", "keep-alive");
  }
  out.append("\r\n"sv);
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
