#include "ucp/http/ClientSession.h"

#include "ResponseParser.h"

namespace ucp::http {
namespace {

class ClientCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "ucp.http.client"; }
  std::string message(int value) const override {
    switch (static_cast<ClientErrc>(value)) {
      case ClientErrc::kClosed:
        return "the server closed the connection before the response was complete";
      case ClientErrc::kMalformedResponse:
        return "malformed HTTP response";
      case ClientErrc::kResponseTooLarge:
        return "response head too large";
      case ClientErrc::kBodyTooLarge:
        return "response body too large";
      case ClientErrc::kBadUrl:
        return "not a URL of the form http[s]://host[:port][/path][?query]";
      case ClientErrc::kUnsupportedScheme:
        return "unsupported URL scheme (only http:// and https://)";
      case ClientErrc::kTooManyRedirects:
        return "too many redirects";
      case ClientErrc::kBadHeader:
        return "invalid request header, method or target";
      case ClientErrc::kBodyLength:
        return "request body length differs from its Content-Length";
    }
    return "unknown HTTP client error";
  }
};

/// tchar (RFC 9110 §5.6.2).
bool is_token(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

/// A field value or target without a byte that would end the line or the string.
bool is_safe_text(std::string_view text) noexcept {
  return text.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

void append_hex(std::string& out, uint64_t value) {
  char digits[16];
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 0xF];
    value >>= 4;
  } while (value != 0);
  while (n > 0) out.push_back(digits[--n]);
}

/// The connection's own read timeout bounded by `timeout_ms` for the reads made while it lives,
/// then put back (a pooled connection's idle receive has none). The reader keeps one timer node
/// for its deadline and only moves its due time per wait, where a deadline of the wait's own
/// (with_deadline) pushes a node into the loop's timer heap and erases it again each time. Its
/// expiry stops the connection's reading, which a session that timed out does no more of.
class ReadTimeout {
 public:
  ReadTimeout(TcpConnection& connection, uint32_t timeout_ms) noexcept
      : connection_(connection), saved_(connection.read_timeout_ms()) {
    // 0 is none: the shorter of the two that are set.
    if (timeout_ms != 0 && (saved_ == 0 || timeout_ms < saved_)) {
      connection.set_read_timeout_ms(timeout_ms);
    }
  }
  ReadTimeout(const ReadTimeout&) = delete;
  ReadTimeout& operator=(const ReadTimeout&) = delete;
  ~ReadTimeout() { connection_.set_read_timeout_ms(saved_); }

 private:
  TcpConnection& connection_;
  uint32_t saved_;
};

}  // namespace

const std::error_category& client_category() noexcept {
  static const ClientCategory category;
  return category;
}

std::string_view ResponseHead::header(std::string_view name) const noexcept {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return {};
}

Result<void> append_request_head(std::string& out, std::string_view method, std::string_view target,
                                 std::span<const Header> headers, BodyFraming framing,
                                 uint64_t length) {
  const auto bad = Unexpected{make_error_code(ClientErrc::kBadHeader)};
  if (!is_token(method) || target.empty() || !is_safe_text(target) ||
      target.find(' ') != std::string_view::npos) {
    return bad;
  }
  for (const Header& h : headers) {
    if (!is_token(h.name) || !is_safe_text(h.value)) return bad;
  }
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  for (const Header& h : headers) out.append(h.name).append(": ").append(h.value).append("\r\n");
  if (framing == BodyFraming::kLength) {
    out.append("Content-Length: ").append(std::to_string(length)).append("\r\n");
  } else if (framing == BodyFraming::kChunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  }
  out.append("\r\n");
  return {};
}

ClientSession::ClientSession(ClientConnection connection, SessionLimits limits)
    : connection_(std::move(connection)),
      parser_(std::make_unique<detail::ResponseParser>(limits)) {}

ClientSession::~ClientSession() = default;

Result<void> ClientSession::fail(std::error_code error) noexcept {
  failed_ = true;
  return Unexpected{error};
}

Result<void> ClientSession::fail_send(std::error_code error) noexcept {
  send_failed_ = true;  // the response may still be read (a server that answered early)
  return Unexpected{error};
}

ClientSession::SendHead ClientSession::send_head(std::string_view head, BodyFraming framing,
                                                 uint64_t length, bool head_request) {
  if (failed_ || send_failed_ || !request_complete_ || !response_complete_ || eof_) {
    return SendHead(*this, make_error_code(std::errc::connection_aborted));
  }
  // Bytes the server sent between two responses would be taken for the next one's.
  if (!pending_.empty()) return SendHead(*this, make_error_code(ClientErrc::kMalformedResponse));
  lease_.reset();
  ++requests_;
  parser_->start(head_request);
  request_framing_ = framing == BodyFraming::kUntilClose ? BodyFraming::kNone : framing;
  request_length_ = framing == BodyFraming::kLength ? length : 0;
  request_sent_ = 0;
  response_started_ = false;
  response_complete_ = false;
  const bool body = request_framing_ == BodyFraming::kChunked ||
                    (request_framing_ == BodyFraming::kLength && length > 0);
  request_complete_ = !body;
  // With a body the head is queued (copied): it leaves with the body's first piece, in one
  // send.
  return SendHead(*this, head, body);
}

Task<Result<void>> ClientSession::send_body(std::string_view bytes) {
  if (failed_ || send_failed_ || request_complete_)
    co_return fail_send(make_error_code(std::errc::connection_aborted));
  if (bytes.empty()) co_return Result<void>{};
  if (request_framing_ == BodyFraming::kLength) {
    if (bytes.size() > request_length_ - request_sent_) {
      co_return fail_send(make_error_code(ClientErrc::kBodyLength));
    }
  } else {
    std::string size;
    append_hex(size, bytes.size());
    size.append("\r\n");
    if (auto queued = co_await connection_->write(size); !queued)
      co_return fail_send(queued.error());
  }
  if (auto sent = co_await connection_->write_all(bytes); !sent) co_return fail_send(sent.error());
  request_sent_ += bytes.size();
  if (request_framing_ == BodyFraming::kChunked) {
    if (auto queued = co_await connection_->write(std::string_view("\r\n")); !queued) {
      co_return fail_send(queued.error());
    }
  }
  co_return Result<void>{};
}

Task<Result<void>> ClientSession::end_body(std::span<const Header> trailers) {
  if (failed_ || send_failed_) co_return fail_send(make_error_code(std::errc::connection_aborted));
  if (request_complete_) co_return Result<void>{};
  if (request_framing_ == BodyFraming::kLength) {
    if (request_sent_ != request_length_)
      co_return fail_send(make_error_code(ClientErrc::kBodyLength));
    request_complete_ = true;
    co_return Result<void>{};
  }
  std::string last = "0\r\n";
  for (const Header& h : trailers) {
    if (!is_token(h.name) || !is_safe_text(h.value)) continue;  // the parser's; never unsafe
    last.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  last.append("\r\n");
  if (auto sent = co_await connection_->write_all(last); !sent) co_return fail_send(sent.error());
  request_complete_ = true;
  co_return Result<void>{};
}

Result<void> ClientSession::received(Result<size_t> received) noexcept {
  if (!received) {
    const std::error_code error = received.error() == std::errc::connection_reset
                                      ? make_error_code(ClientErrc::kClosed)
                                      : received.error();
    return fail(error);
  }
  if (*received == 0) {
    eof_ = true;
    return {};
  }
  pending_ = {lease_.chars(), lease_.size()};
  response_started_ = true;
  return {};
}

Task<Result<const ResponseHead*>> ClientSession::read_head(uint32_t timeout_ms) {
  using Event = detail::ResponseParser::Event;
  if (failed_) co_return Unexpected{make_error_code(std::errc::connection_aborted)};
  for (;;) {
    const Event event = eof_ ? parser_->finish() : parser_->feed(pending_);
    switch (event) {
      case Event::kHead:
        co_return &parser_->head();
      case Event::kError:
        if (eof_) co_return Unexpected{fail(make_error_code(ClientErrc::kClosed)).error()};
        co_return Unexpected{
            fail(make_error_code(parser_->too_large() ? ClientErrc::kResponseTooLarge
                                                      : ClientErrc::kMalformedResponse))
                .error()};
      case Event::kBody:
      case Event::kEnd:  // not before a head
        co_return Unexpected{fail(make_error_code(ClientErrc::kMalformedResponse)).error()};
      case Event::kNeedMore:
        break;
    }
    // Awaited here rather than in a coroutine of its own: one frame less per response.
    lease_.reset();
    pending_ = {};
    const ReadTimeout deadline(*connection_, timeout_ms);
    if (auto more = received(co_await connection_->receive_into(lease_)); !more) {
      co_return Unexpected{more.error()};
    }
  }
}

std::optional<Result<std::string_view>> ClientSession::next_body_event() noexcept {
  using Event = detail::ResponseParser::Event;
  const Event event = eof_ ? parser_->finish() : parser_->feed(pending_);
  switch (event) {
    case Event::kBody:
      return parser_->body_piece();
    case Event::kEnd:
      response_complete_ = true;
      if (pending_.empty()) lease_.reset();
      return std::string_view();
    case Event::kError:
      if (eof_) return Unexpected{fail(make_error_code(ClientErrc::kClosed)).error()};
      return Unexpected{fail(make_error_code(parser_->too_large() ? ClientErrc::kResponseTooLarge
                                                                  : ClientErrc::kMalformedResponse))
                            .error()};
    case Event::kHead:
      return Unexpected{fail(make_error_code(ClientErrc::kMalformedResponse)).error()};
    case Event::kNeedMore:
      break;
  }
  return std::nullopt;
}

std::optional<Result<std::string_view>> ClientSession::try_read_body() noexcept {
  if (failed_) return Unexpected{make_error_code(std::errc::connection_aborted)};
  if (response_complete_) return std::string_view();
  if (!parser_->head_complete())
    return Unexpected{fail(make_error_code(std::errc::invalid_argument)).error()};
  if (parser_->head().status == 101) {
    response_complete_ = true;  // the rest is another protocol's (take_received)
    return std::string_view();
  }
  return next_body_event();
}

Task<Result<std::string_view>> ClientSession::read_body(uint32_t timeout_ms) {
  if (auto now = try_read_body()) co_return std::move(*now);
  for (;;) {
    lease_.reset();
    pending_ = {};
    const ReadTimeout deadline(*connection_, timeout_ms);
    if (auto more = received(co_await connection_->receive_into(lease_)); !more) {
      co_return Unexpected{more.error()};
    }
    if (auto now = next_body_event()) co_return std::move(*now);
  }
}

const ResponseHead& ClientSession::response_head() const noexcept { return parser_->head(); }

std::span<const Header> ClientSession::trailers() const noexcept { return parser_->trailers(); }

BufferLease ClientSession::take_received() noexcept {
  if (pending_.empty()) {
    lease_.reset();
    return {};
  }
  lease_.consume(static_cast<size_t>(pending_.data() - lease_.chars()));
  pending_ = {};
  failed_ = true;  // the connection is no longer HTTP
  return std::move(lease_);
}

bool ClientSession::reusable() const noexcept {
  return !failed_ && !send_failed_ && !eof_ && request_complete_ && response_complete_ &&
         pending_.empty() && parser_->complete() && parser_->head().keep_alive &&
         !connection_->closed();
}

Task<> ClientSession::close() {
  failed_ = true;
  lease_.reset();
  pending_ = {};
  co_await connection_->close();
}

}  // namespace ucp::http
