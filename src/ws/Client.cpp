// WebSocket::connect: the client's opening handshake (RFC 6455 §4.1) on TcpClient.

#include <array>
#include <atomic>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <sys/random.h>
#include <unistd.h>

#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/ws/WebSocket.h"

#include "Base64.h"
#include "Deflate.h"
#include "Handshake.h"
#include "WebSocketExtras.h"

namespace ucp::ws {
namespace {

constexpr size_t kMaxResponseHead = 16 * 1024;

struct WsUrl {
  std::string host;         // as TcpClient takes it ("::1" without brackets works too)
  std::string host_header;  // "example.com", "example.com:8080", "[::1]:8080"
  std::string target;       // "/path?query"
  uint16_t port = 80;
  bool secure = false;  // wss://
};

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] + 32) : text[i];
    const char p =
        prefix[i] >= 'A' && prefix[i] <= 'Z' ? static_cast<char>(prefix[i] + 32) : prefix[i];
    if (c != p) return false;
  }
  return true;
}

/// uri-host [ ":" port ] characters (RFC 3986): unreserved, pct-encoded, sub-delims, ':' and
/// the brackets of an IP-literal. The authority becomes the Host header: nothing that could end
/// the field, or start another, gets through.
bool is_authority_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-._~!$&'()*+,;=%:[]").find(c) != std::string_view::npos;
}

/// tchar (RFC 9110 §5.6.2): what a field name is made of.
bool is_token_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool parse_url(std::string_view url, WsUrl& out) {
  if (starts_with_nocase(url, "wss://")) {
    out.secure = true;
    out.port = 443;
    url.remove_prefix(6);
  } else if (starts_with_nocase(url, "ws://")) {
    url.remove_prefix(5);
  } else {
    return false;
  }
  const size_t end = url.find_first_of("/?#");
  std::string_view authority = url.substr(0, end);
  std::string_view rest = end == std::string_view::npos ? std::string_view() : url.substr(end);
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  if (authority.empty() || authority.find('@') != std::string_view::npos) return false;
  for (const char c : authority) {
    if (!is_authority_char(c)) return false;
  }
  std::string_view host = authority;
  std::string_view port;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return false;
  if (!port.empty()) {
    unsigned value = 0;
    const auto result = std::from_chars(port.data(), port.data() + port.size(), value);
    if (result.ec != std::errc() || result.ptr != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return false;
    }
    out.port = static_cast<uint16_t>(value);
  }
  out.host.assign(host);
  out.host_header.assign(authority);
  out.target = rest.empty() || rest.front() != '/' ? "/" + std::string(rest) : std::string(rest);
  for (const char c : out.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) return false;  // no request splitting
  }
  return true;
}

std::string new_key() {
  std::array<uint8_t, 16> nonce{};
  if (::getrandom(nonce.data(), nonce.size(), 0) != static_cast<ssize_t>(nonce.size())) {
    // No entropy (a very early boot): the key only has to differ between connections.
    static std::atomic<uint64_t> counter{0};
    const uint64_t value = counter.fetch_add(1) ^ static_cast<uint64_t>(::getpid()) << 32;
    std::memcpy(nonce.data(), &value, sizeof value);
  }
  return detail::base64_encode(nonce);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && starts_with_nocase(a, b);
}

/// Checks the server's answer (the head, without the empty line) against what was asked.
bool check_response(std::string_view head, std::string_view key, const Options& options,
                    detail::Negotiated& negotiated) {
  const size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  if (status_line.substr(0, 13) != "HTTP/1.1 101 " && status_line != "HTTP/1.1 101") {
    LOG_DEBUG("ws client: the server answered \"{}\"", status_line);
    return false;
  }
  bool upgrade = false;
  bool connection = false;
  bool accepted = false;
  int protocols = 0;
  std::vector<detail::Extension> extensions;
  const std::string expected = detail::accept_key(key);
  size_t at = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view line = head.substr(at, end - at);
    at = end + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view name = line.substr(0, colon);
    // A name of tchars only: an obs-fold (a line starting with whitespace) or whitespace
    // before the colon is refused, as the server refuses them in requests (RFC 9112 §5).
    for (const char c : name) {
      if (!is_token_char(c)) return false;
    }
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequal(name, "upgrade")) {
      upgrade = upgrade || detail::has_token(value, "websocket");
    } else if (iequal(name, "connection")) {
      connection = connection || detail::has_token(value, "upgrade");
    } else if (iequal(name, "sec-websocket-accept")) {
      if (accepted || value != expected) return false;
      accepted = true;
    } else if (iequal(name, "sec-websocket-protocol")) {
      // Exactly one of those we offered.
      if (++protocols > 1) return false;
      negotiated.subprotocol = detail::kNoSubprotocol;
      for (size_t i = 0; i < options.subprotocols.size() && i < detail::kNoSubprotocol; ++i) {
        if (options.subprotocols[i] == value) negotiated.subprotocol = static_cast<uint8_t>(i);
      }
      if (negotiated.subprotocol == detail::kNoSubprotocol) return false;
    } else if (iequal(name, "sec-websocket-extensions")) {
      if (!detail::parse_extensions(value, extensions)) return false;
    }
  }
  if (!upgrade || !connection || !accepted) return false;
  // Only what was offered: permessage-deflate, once.
  if (!extensions.empty()) {
    if (!options.deflate.enabled || extensions.size() != 1) return false;
    if (!detail::accept_deflate_response(extensions.front(), options.deflate,
                                         negotiated.deflate_params)) {
      return false;
    }
    negotiated.deflate = true;
  }
  return true;
}

/// wss:// without a context of the caller's: one for the process, trusting the system's CAs,
/// offering http/1.1 (the upgrade is an HTTP/1.1 request); made once, kept for resumption.
Result<std::shared_ptr<const tls::TlsContext>, Error> default_tls_context() {
  static const auto context = [] {
    tls::TlsClientOptions options;
    options.alpn = {"http/1.1"};
    return tls::TlsContext::client(options);
  }();
  return context;
}

}  // namespace

Task<Result<std::unique_ptr<WebSocket>>> WebSocket::connect(EventLoop& loop, std::string url,
                                                            Options options, ClientOptions tcp) {
  WsUrl where;
  if (!parse_url(url, where)) co_return Unexpected{make_error_code(Errc::kBadUrl)};
  const Clock::time_point due =
      options.handshake_timeout_ms == 0
          ? Clock::time_point::max()
          : loop.now() + std::chrono::milliseconds(options.handshake_timeout_ms);
  if (options.handshake_timeout_ms > 0 &&
      (tcp.connect_timeout_ms == 0 || tcp.connect_timeout_ms > options.handshake_timeout_ms)) {
    tcp.connect_timeout_ms = options.handshake_timeout_ms;
  }
  if (where.secure && !tcp.tls) {
    auto context = default_tls_context();
    if (!context) {
      LOG_WARN("ws client: {}", context.error().message);
      co_return Unexpected{context.error().code ? context.error().code
                                                : make_error_code(Errc::kHandshakeFailed)};
    }
    tcp.tls = *context;
  }
  auto connected = co_await TcpClient::connect(loop, where.host, where.port, tcp);
  if (!connected) co_return Unexpected{connected.error()};
  ClientConnection connection = std::move(*connected);

  const std::string key = new_key();
  std::string request =
      "GET " + where.target + " HTTP/1.1\r\nHost: " + where.host_header +
      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
      "\r\nSec-WebSocket-Version: 13\r\n";
  if (!options.subprotocols.empty()) {
    request += "Sec-WebSocket-Protocol: ";
    for (size_t i = 0; i < options.subprotocols.size(); ++i) {
      if (i > 0) request += ", ";
      request += options.subprotocols[i];
    }
    request += "\r\n";
  }
  if (options.deflate.enabled) {
    request += "Sec-WebSocket-Extensions: " + detail::deflate_offer(options.deflate) + "\r\n";
  }
  request += "\r\n";
  if (auto sent =
          co_await with_deadline(connection->write_all(std::as_bytes(std::span(request))), due);
      !sent) {
    co_return Unexpected{sent.error()};
  }

  // The answer's head; what follows it in the same read is the first frames already.
  std::string head;
  BufferLease rest;
  for (;;) {
    auto data = co_await with_deadline(connection->receive(), due);
    if (!data) co_return Unexpected{data.error()};
    if (data->empty()) co_return Unexpected{make_error_code(Errc::kHandshakeFailed)};
    const size_t before = head.size();
    head.append(data->chars(), data->size());
    const size_t end = head.find("\r\n\r\n", before < 3 ? 0 : before - 3);
    if (end != std::string::npos) {
      const size_t used = end + 4 - before;  // bytes of this read that belong to the head
      head.resize(end);
      if (used < data->size()) {
        rest = std::move(*data);
        rest.consume(used);
      }
      break;
    }
    if (head.size() > kMaxResponseHead)
      co_return Unexpected{make_error_code(Errc::kHandshakeFailed)};
  }
  detail::Negotiated negotiated;
  if (!check_response(head, key, options, negotiated)) {
    co_return Unexpected{make_error_code(Errc::kHandshakeFailed)};
  }
  auto extras = std::make_unique<detail::WebSocketExtras>();
  extras->options = std::move(options);
  extras->connection = std::move(connection);
  TcpConnection& conn = *extras->connection;
  const Options& kept = extras->options;
  co_return std::unique_ptr<WebSocket>(
      new WebSocket(conn, kept, Role::kClient, std::move(rest), negotiated, std::move(extras)));
}

}  // namespace ucp::ws
