#include "ucp/http/Client.h"

#include <charconv>

#include "ucp/net/TcpClient.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsError.h"

namespace ucp::http {
namespace {

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

/// Bytes a URL may not hold as they are: controls, space, DEL.
bool has_unsafe_byte(std::string_view text) noexcept {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7F) return true;
  }
  return false;
}

bool valid_reg_name(std::string_view host) noexcept {
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
    if (!ok) return false;
  }
  return !host.empty();
}

bool valid_ipv6_literal(std::string_view host) noexcept {
  for (const char c : host) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                    c == ':' || c == '.';
    if (!ok) return false;
  }
  return host.find(':') != std::string_view::npos;
}

bool is_redirect(int status) noexcept {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// A failure that a pooled connection closed by the server just before the request explains.
bool stale_connection(std::error_code error) noexcept {
  return error == ClientErrc::kClosed || error == std::errc::connection_reset ||
         error == std::errc::broken_pipe;
}

bool method_sends_body(std::string_view method) noexcept {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

/// The URL a Location names, from the one it answered.
Result<std::string> resolve_location(const ParsedUrl& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return std::string(location);
  if (location.substr(0, 2) == "//")
    return std::string(base.scheme()) + ":" + std::string(location);
  std::string url = std::string(base.scheme()) + "://" + base.authority();
  if (!location.empty() && location.front() == '/') return url + std::string(location);
  // Relative to the base's directory (RFC 3986 §5.2.3, without dot-segment removal: the
  // server resolves those).
  const std::string_view path = std::string_view(base.target).substr(0, base.target.find('?'));
  return url + std::string(path.substr(0, path.rfind('/') + 1)) + std::string(location);
}

}  // namespace

// ---- ParsedUrl ----

Result<ParsedUrl> ParsedUrl::parse(std::string_view text) {
  const auto bad = Unexpected{make_error_code(ClientErrc::kBadUrl)};
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) return bad;
  const std::string_view scheme = text.substr(0, scheme_end);
  const bool https = iequals(scheme, "https");
  if (!https && !iequals(scheme, "http")) {
    return Unexpected{make_error_code(ClientErrc::kUnsupportedScheme)};
  }
  std::string_view rest = text.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('#'));  // a fragment is the client's, never sent
  if (has_unsafe_byte(rest)) return bad;
  const size_t authority_end = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view target =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) return bad;  // no credentials in URLs

  ParsedUrl url;
  url.https = https;
  url.port = url.default_port();
  std::string_view host;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad;
    host = authority.substr(1, close - 1);
    if (!valid_ipv6_literal(host)) return bad;
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad;
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    if (!valid_reg_name(host)) return bad;
  }
  if (authority.find(':') != std::string_view::npos && port.empty() && authority.front() != '[') {
    return bad;
  }
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (error != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return bad;
    }
    url.port = static_cast<uint16_t>(value);
  }
  url.host.reserve(host.size());
  for (const char c : host) url.host.push_back(lower(c));
  if (target.empty()) {
    url.target = "/";
  } else if (target.front() == '?') {
    url.target = "/" + std::string(target);
  } else {
    url.target = std::string(target);
  }
  return url;
}

std::string ParsedUrl::authority() const {
  std::string text = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != default_port()) text += ":" + std::to_string(port);
  return text;
}

std::string ParsedUrl::origin() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(scheme()) + "://" + name + ":" + std::to_string(port);
}

// ---- ClientResponse ----

ClientResponse::ClientResponse(Client& client, std::unique_ptr<ClientSession> session,
                               std::string key, std::string url)
    : client_(&client),
      session_(std::move(session)),
      key_(std::move(key)),
      url_(std::move(url)),
      head_(nullptr) {}

ClientResponse::~ClientResponse() = default;

void ClientResponse::release(bool body_ended) {
  // The head lives in the connection's parser: it is copied to stay readable. Read to the end,
  // the connection then serves the next request to the origin at once; otherwise it is closed
  // (in the background) with what the server still sends.
  ended_ = true;
  if (!session_) return;
  const ResponseHead& head = *head_;
  size_t bytes = head.reason.size();
  for (const Header& h : head.headers) bytes += h.name.size() + h.value.size();
  auto kept = std::make_unique<KeptHead>();
  kept->bytes.reserve(bytes);  // no reallocation below: the views stay put
  auto keep = [&kept](std::string_view text) {
    const size_t at = kept->bytes.size();
    kept->bytes.append(text);
    return std::string_view(kept->bytes).substr(at, text.size());
  };
  kept->head = head;
  kept->head.reason = keep(head.reason);
  for (Header& h : kept->head.headers) {
    h.name = keep(h.name);
    h.value = keep(h.value);
  }
  kept_ = std::move(kept);
  head_ = &kept_->head;
  if (body_ended && session_->reusable()) {
    client_->pool_.give(key_, std::move(session_));
  } else {
    session_.reset();
  }
}

Task<Result<std::string_view>> ClientResponse::read() {
  if (ended_ || !session_) co_return std::string_view();
  auto piece = co_await session_->read_body(client_->options_.timeout_ms);
  if (!piece) {
    release(false);
    co_return Unexpected{piece.error()};
  }
  if (piece->empty()) release(true);
  co_return *piece;
}

Task<Result<std::string>> ClientResponse::read_all() {
  co_return co_await read_all(client_->options_.max_body_bytes);
}

Task<Result<std::string>> ClientResponse::read_all(uint64_t max_bytes) {
  std::string body;
  if (head_->framing == BodyFraming::kLength) {
    if (head_->content_length > max_bytes) {
      release(false);
      co_return Unexpected{make_error_code(ClientErrc::kBodyTooLarge)};
    }
    body.reserve(head_->content_length);
  }
  for (;;) {
    auto piece = co_await read();
    if (!piece) co_return Unexpected{piece.error()};
    if (piece->empty()) co_return body;
    if (piece->size() > max_bytes - body.size()) {
      release(false);
      co_return Unexpected{make_error_code(ClientErrc::kBodyTooLarge)};
    }
    body.append(*piece);
  }
}

// ---- Client ----

Client::Client(EventLoop& loop, ClientOptions options)
    : loop_(loop), options_(std::move(options)), pool_(loop, options_.pool), tls_(options_.tls) {}

Result<std::shared_ptr<const tls::TlsContext>, Error> Client::tls_context(
    tls::TlsClientOptions options) {
  if (options.alpn.empty()) options.alpn = {"http/1.1"};
  return tls::TlsContext::client(options);
}

Client::~Client() = default;

Task<Result<ClientResponse>> Client::get(std::string url) {
  ClientRequest request;
  request.url = std::move(url);
  co_return co_await send(std::move(request));
}

Task<Result<std::unique_ptr<ClientSession>>> Client::connect(const ParsedUrl& url) {
  ucp::ClientOptions connect_options;
  connect_options.connect_timeout_ms = options_.connect_timeout_ms;
  connect_options.output.write_timeout_ms = options_.timeout_ms;  // a server that stops reading
  connect_options.resolver = options_.resolver;
  if (url.https) {
    if (!tls_) {
      // The system's CAs, loaded once per client and only by one that speaks https://.
      auto made = tls_context({});
      if (!made) {
        const std::error_code code = made.error().code;
        co_return Unexpected{code ? code : tls::make_error_code(tls::Errc::kInternal)};
      }
      tls_ = std::move(*made);
    }
    connect_options.tls = tls_;
  }
  auto connection = co_await TcpClient::connect(loop_, url.host, url.port, connect_options);
  if (!connection) co_return Unexpected{connection.error()};
  ++connections_made_;
  co_return std::make_unique<ClientSession>(std::move(*connection), options_.limits);
}

Task<Result<ClientResponse>> Client::exchange(const ParsedUrl& url, ClientRequest& request,
                                              bool replayable) {
  // The head, encoded once for every attempt.
  std::vector<Header> headers;
  headers.reserve(request.headers.size() + 2);
  bool has_host = false;
  bool has_agent = false;
  for (const auto& [name, value] : request.headers) {
    if (iequals(name, "content-length") || iequals(name, "transfer-encoding")) continue;  // ours
    has_host = has_host || iequals(name, "host");
    has_agent = has_agent || iequals(name, "user-agent");
    headers.push_back({name, value});
  }
  const std::string authority = url.authority();
  if (!has_host) headers.insert(headers.begin(), Header{"Host", authority});
  if (!has_agent && !options_.user_agent.empty()) {
    headers.push_back({"User-Agent", options_.user_agent});
  }
  BodyFraming framing = BodyFraming::kNone;
  uint64_t length = 0;
  if (request.body_source) {
    framing = request.body_length ? BodyFraming::kLength : BodyFraming::kChunked;
    length = request.body_length.value_or(0);
  } else if (!request.body.empty() || method_sends_body(request.method)) {
    framing = BodyFraming::kLength;
    length = request.body.size();
  }
  std::string head;
  if (auto encoded =
          append_request_head(head, request.method, url.target, headers, framing, length);
      !encoded) {
    co_return Unexpected{encoded.error()};
  }
  const bool head_request = request.method == "HEAD";
  const std::string key = url.origin();

  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<ClientSession> session = co_await pool_.take(key);
    const bool reused = session != nullptr;
    if (!session) {
      auto made = co_await connect(url);
      if (!made) co_return Unexpected{made.error()};
      session = std::move(*made);
    }
    std::error_code failure;
    if (auto sent = co_await session->send_head(head, framing, length, head_request); !sent) {
      failure = sent.error();
    }
    if (!failure && framing != BodyFraming::kNone) {
      if (request.body_source) {
        for (;;) {
          auto piece = co_await request.body_source();
          if (!piece) co_return Unexpected{piece.error()};  // the caller's own failure
          if (piece->empty()) break;
          if (auto sent = co_await session->send_body(*piece); !sent) {
            failure = sent.error();
            break;
          }
        }
      } else if (auto sent = co_await session->send_body(request.body); !sent) {
        failure = sent.error();
      }
      if (!failure) {
        if (auto ended = co_await session->end_body(); !ended) failure = ended.error();
      }
    }
    if (failure != ClientErrc::kBodyLength) {
      // Also after a failed send: a server may answer before it has read the whole body (a
      // 413, say) and stop reading, and its answer counts.
      auto response = co_await session->read_head(options_.timeout_ms);
      if (response) {
        failure = {};
      } else if (!failure) {
        failure = response.error();
      }
    }
    if (!failure) {
      ClientResponse result(*this, std::move(session), key,
                            std::string(url.scheme()) + "://" + authority + url.target);
      result.head_ = &result.session_->response_head();
      co_return std::move(result);
    }
    if (reused && attempt == 0 && replayable && !session->response_started() &&
        stale_connection(failure)) {
      continue;  // the server had closed it: once more on a new connection
    }
    co_return Unexpected{failure};
  }
}

Task<Result<ClientResponse>> Client::send(ClientRequest request) {
  auto url = ParsedUrl::parse(request.url);
  if (!url) co_return Unexpected{url.error()};
  const bool streamed = static_cast<bool>(request.body_source);
  for (uint32_t redirects = 0;; ++redirects) {
    auto response = co_await exchange(*url, request, !streamed);
    if (!response) co_return Unexpected{response.error()};
    const int status = response->status();
    const std::string_view location = response->header("location");
    if (options_.max_redirects == 0 || !is_redirect(status) || location.empty()) {
      co_return std::move(*response);
    }
    if (streamed && (status == 307 || status == 308)) co_return std::move(*response);
    if (redirects >= options_.max_redirects) {
      co_return Unexpected{make_error_code(ClientErrc::kTooManyRedirects)};
    }
    auto next_text = resolve_location(*url, location);
    if (!next_text) co_return Unexpected{next_text.error()};
    auto next = ParsedUrl::parse(*next_text);
    if (!next) co_return Unexpected{next.error()};
    // The body of the redirect is read away (small, usually) so that the connection is reused.
    (void)co_await response->read_all(64 * 1024);
    if (next->origin() != url->origin()) {
      std::erase_if(request.headers, [](const auto& field) {
        return iequals(field.first, "authorization") || iequals(field.first, "cookie") ||
               iequals(field.first, "host");
      });
    }
    if (status == 303 || ((status == 301 || status == 302) && request.method == "POST")) {
      if (request.method != "HEAD") request.method = "GET";
      request.body.clear();
      request.body_source = {};
      request.body_length.reset();
      std::erase_if(request.headers,
                    [](const auto& field) { return iequals(field.first, "content-type"); });
    }
    request.url = std::move(*next_text);
    url = std::move(next);
  }
}

}  // namespace ucp::http
