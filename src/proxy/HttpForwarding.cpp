#include "HttpForwarding.h"

#include <arpa/inet.h>

#include "ucp/http/Status.h"

namespace ucp::proxy::detail {
namespace {

using http::iequals;

// RFC 9110 §7.6.1.
constexpr std::string_view kHopByHop[] = {"connection", "proxy-connection",  "keep-alive",
                                          "te",         "transfer-encoding", "upgrade"};

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
  out.append(name).append(": ").append(value).append("\r\n");
}

}  // namespace

HopByHop::HopByHop(std::span<const http::Header> fields) noexcept : fields_(fields) {
  for (const http::Header& field : fields_) {
    if (!iequals(field.name, "connection")) continue;
    if (connection_count_ == kMaxConnectionFields) {
      more_ = true;
      break;
    }
    connection_[connection_count_++] = field.value;
  }
}

bool HopByHop::contains(std::string_view name) const noexcept {
  if (iequals(name, "host")) return false;
  for (const std::string_view hop : kHopByHop) {
    if (iequals(name, hop)) return true;
  }
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
  std::string_view target = request.target();
  out.append(request.method_name()).append(" ");
  if (!target.empty() && target.front() != '/' && target != "*") {  // absolute-form
    out.append(request.path());
    if (!request.query().empty()) out.append("?").append(request.query());
  } else {
    out.append(target);
  }
  out.append(" HTTP/1.1\r\n");
  append_field(out, "Host", request.host());
  const HopByHop hop(request.headers());
  bool forwarded_for = false;
  bool forwarded = false;
  for (const http::Header& field : request.headers()) {
    const std::string_view name = field.name;
    if (iequals(name, "host") || hop.contains(name) || iequals(name, "content-length") ||
        iequals(name, "expect") || iequals(name, "x-forwarded-proto")) {
      continue;
    }
    // Joined below, with the client added.
    if (iequals(name, "x-forwarded-for")) {
      forwarded_for = true;
      continue;
    }
    if (iequals(name, "forwarded")) {
      forwarded = true;
      continue;
    }
    append_field(out, name, field.value);
  }
  // What came in (every field of the name, in order), then this hop's.
  auto join = [&](std::string_view name, bool present) {
    out.append(name).append(": ");
    if (!present) return;
    for (const http::Header& field : request.headers()) {
      if (iequals(field.name, name) && !hop.contains(field.name)) {
        out.append(field.value).append(", ");
      }
    }
  };
  join("X-Forwarded-For", forwarded_for);
  out.append(head.client_ip).append("\r\n");
  append_field(out, "X-Forwarded-Proto", head.proto);
  join("Forwarded", forwarded);
  out.append("for=");
  if (head.client_ip.find(':') != std::string_view::npos) {
    out.append("\"[").append(head.client_ip).append("]\"");
  } else {
    out.append(head.client_ip);
  }
  out.append(";proto=").append(head.proto);
  if (!request.host().empty()) out.append(";host=\"").append(request.host()).append("\"");
  out.append("\r\n");
  if (head.framing == http::BodyFraming::kLength) {
    append_field(out, "Content-Length", std::to_string(head.content_length));
  } else if (head.framing == http::BodyFraming::kChunked) {
    append_field(out, "Transfer-Encoding", "chunked");
  }
  if (head.websocket) {
    append_field(out, "Connection", "Upgrade");
    append_field(out, "Upgrade", request.header("upgrade"));
  }
  out.append("\r\n");
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
  const std::string_view reason =
      response.reason.empty() ? http::reason_phrase(response.status) : response.reason;
  out.append("HTTP/1.1 ").append(std::to_string(response.status)).append(" ").append(reason);
  out.append("\r\n");
  // A response without a body (to HEAD, a 304) keeps the Content-Length it announces.
  const bool keep_length =
      head.framing == ClientFraming::kNone && response.status >= 200 && response.status != 204;
  const HopByHop hop(response.headers);
  for (const http::Header& field : response.headers) {
    if (hop.contains(field.name)) continue;
    if (iequals(field.name, "content-length") && !keep_length) continue;
    append_field(out, field.name, field.value);
  }
  if (head.framing == ClientFraming::kLength) {
    append_field(out, "Content-Length", std::to_string(response.content_length));
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
  out.append("\r\n");
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
