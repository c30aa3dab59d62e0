#include "ucp/http/AccessLog.h"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <exception>
#include <utility>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "ucp/http/Request.h"
#include "ucp/http/Response.h"
#include "ucp/http/Status.h"
#include "ucp/net/InetAddress.h"

namespace ucp::http {
namespace {

struct Named {
  std::string_view name;
  uint8_t field;
};

void append_number(std::string& out, uint64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

/// Request bytes as one safe token: control bytes, bytes above 0x7E, '"' and '\' as \xHH.
void append_escaped(std::string& out, std::string_view text) {
  if (text.empty()) {
    out.push_back('-');
    return;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7E || c == '"' || c == '\\') {
      const char escaped[4] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
      out.append(escaped, 4);
    } else {
      out.push_back(c);
    }
  }
}

/// "192.0.2.7" or "2001:db8::1" (without the port); "-" outside a connection.
void append_peer_ip(std::string& out, const InetAddress* peer) {
  char text[INET6_ADDRSTRLEN] = "-";
  if (peer != nullptr && peer->family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(peer->get());
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
  } else if (peer != nullptr && peer->family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(peer->get());
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
  }
  out.append(text);
}

void append_time(std::string& out, bool local_style) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::tm parts{};
  ::gmtime_r(&now.tv_sec, &parts);
  char text[48];
  size_t n = 0;
  if (local_style) {
    n = std::strftime(text, sizeof text, "[%d/%b/%Y:%H:%M:%S +0000]", &parts);
  } else {
    n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &parts);
    n += static_cast<size_t>(std::snprintf(text + n, sizeof text - n, ".%03ldZ",
                                           static_cast<long>(now.tv_nsec / 1'000'000)));
  }
  out.append(text, n);
}

}  // namespace

uint64_t response_body_bytes(const Request& request, const Response& response) noexcept {
  if (request.method() == Method::kHead || status_has_no_body(response.status())) return 0;
  switch (response.body_kind()) {
    case Response::BodyKind::kBorrowed:
    case Response::BodyKind::kOwned:
      return response.body().size();
    case Response::BodyKind::kFile:
      return response.file_length();
    case Response::BodyKind::kStream:
    case Response::BodyKind::kNone:
      break;
  }
  return response.head_sent() ? response.bytes_streamed() : 0;
}

AccessLogFormat::AccessLogFormat() : AccessLogFormat(*parse(kDefault)) {}

Result<AccessLogFormat, Error> AccessLogFormat::parse(std::string_view format) {
  static constexpr Named kFields[] = {
      {"peer", static_cast<uint8_t>(Field::kPeer)},
      {"peer_ip", static_cast<uint8_t>(Field::kPeerIp)},
      {"method", static_cast<uint8_t>(Field::kMethod)},
      {"target", static_cast<uint8_t>(Field::kTarget)},
      {"path", static_cast<uint8_t>(Field::kPath)},
      {"query", static_cast<uint8_t>(Field::kQuery)},
      {"protocol", static_cast<uint8_t>(Field::kProtocol)},
      {"host", static_cast<uint8_t>(Field::kHost)},
      {"status", static_cast<uint8_t>(Field::kStatus)},
      {"bytes", static_cast<uint8_t>(Field::kBytes)},
      {"duration_us", static_cast<uint8_t>(Field::kDurationUs)},
      {"duration_ms", static_cast<uint8_t>(Field::kDurationMs)},
      {"user_agent", static_cast<uint8_t>(Field::kUserAgent)},
      {"referer", static_cast<uint8_t>(Field::kReferer)},
      {"request_id", static_cast<uint8_t>(Field::kRequestId)},
      {"time", static_cast<uint8_t>(Field::kTime)},
      {"time_local", static_cast<uint8_t>(Field::kTimeLocal)},
  };
  const auto field_list = [] {
    std::string names;
    for (const Named& named : kFields) names.append(names.empty() ? "" : ", ").append(named.name);
    return names + ", header:NAME";
  };
  AccessLogFormat result{Empty{}};
  std::string literal;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      literal.push_back(c);  // "{{" or "}}"
      ++i;
      continue;
    }
    if (c == '}') {
      return Unexpected{Error("access log format: a '}' without its '{' at offset " +
                              std::to_string(i) + " (write \"}}\" for a brace)")};
    }
    if (c != '{') {
      literal.push_back(c);
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) {
      return Unexpected{Error("access log format: '{' at offset " + std::to_string(i) +
                              " is not closed (write \"{{\" for a brace)")};
    }
    const std::string_view name = format.substr(i + 1, close - i - 1);
    Piece piece{Field::kLiteral, {}};
    if (name.substr(0, 7) == "header:" && name.size() > 7) {
      piece = {Field::kHeader, std::string(name.substr(7))};
    } else {
      for (const Named& named : kFields) {
        if (named.name == name) piece.field = static_cast<Field>(named.field);
      }
      if (piece.field == Field::kLiteral) {
        return Unexpected{Error("access log format: unknown field {" + std::string(name) +
                                "} (fields: " + field_list() + ")")};
      }
    }
    if (!literal.empty()) result.pieces_.push_back({Field::kLiteral, std::exchange(literal, {})});
    result.pieces_.push_back(std::move(piece));
    i = close;
  }
  if (!literal.empty()) result.pieces_.push_back({Field::kLiteral, std::move(literal)});
  return result;
}

void AccessLogFormat::append(std::string& out, const Request& request, const Response& response,
                             std::chrono::nanoseconds duration) const {
  for (const Piece& piece : pieces_) {
    switch (piece.field) {
      case Field::kLiteral:
        out.append(piece.text);
        break;
      case Field::kPeer:
        out.append(request.peer() != nullptr ? request.peer()->to_string() : "-");
        break;
      case Field::kPeerIp:
        append_peer_ip(out, request.peer());
        break;
      case Field::kMethod:
        append_escaped(out, request.method_name());
        break;
      case Field::kTarget:
        append_escaped(out, request.target());
        break;
      case Field::kPath:
        append_escaped(out, request.path());
        break;
      case Field::kQuery:
        append_escaped(out, request.query());
        break;
      case Field::kProtocol:
        out.append(request.version_minor() == 0 ? "HTTP/1.0" : "HTTP/1.1");
        break;
      case Field::kHost:
        append_escaped(out, request.host());
        break;
      case Field::kStatus:
        append_number(out, static_cast<uint64_t>(response.status()));
        break;
      case Field::kBytes:
        append_number(out, response_body_bytes(request, response));
        break;
      case Field::kDurationUs:
        append_number(out, static_cast<uint64_t>(duration.count() / 1000));
        break;
      case Field::kDurationMs: {
        const auto us = static_cast<uint64_t>(duration.count() / 1000);
        append_number(out, us / 1000);
        char fraction[5] = {'.', static_cast<char>('0' + us / 100 % 10),
                            static_cast<char>('0' + us / 10 % 10), static_cast<char>('0' + us % 10),
                            '\0'};
        out.append(fraction, 4);
        break;
      }
      case Field::kUserAgent:
        append_escaped(out, request.header("user-agent"));
        break;
      case Field::kReferer:
        append_escaped(out, request.header("referer"));
        break;
      case Field::kRequestId:
        append_escaped(out, request.id());
        break;
      case Field::kTime:
        append_time(out, false);
        break;
      case Field::kTimeLocal:
        append_time(out, true);
        break;
      case Field::kHeader:
        append_escaped(out, request.header(piece.text));
        break;
    }
  }
}

Middleware access_log(AccessLogOptions options) {
  return [options = std::move(options)](Request& request, Response& response, Next next) -> Task<> {
    if (!options.sink && !Logger::enabled(options.level)) {  // no clock read while it is off
      co_await next();
      co_return;
    }
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr failure;
    try {
      co_await next();
    } catch (...) {
      // Logged as the 500 the server makes of it (a stream that started keeps its status: the
      // connection is closed), then passed on.
      failure = std::current_exception();
      if (!response.head_sent()) response.set_status(500);
    }
    const auto duration = std::chrono::steady_clock::now() - start;
    thread_local std::string line;
    line.clear();
    options.format.append(line, request, response, duration);
    if (options.sink) {
      options.sink(line);
    } else {
      UCP_LOG_AT(options.level, "{}", std::string_view(line));
    }
    if (failure) std::rethrow_exception(failure);
  };
}

Middleware access_log(LogLevel level) { return access_log(AccessLogOptions{.level = level}); }

}  // namespace ucp::http
