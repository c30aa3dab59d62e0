#include "ucp/http/RequestReader.h"

#include <chrono>
#include <limits>

#include "ucp/io/WithTimeout.h"

#include "RequestParser.h"

namespace ucp::http {
namespace {

detail::ParserLimits limits_of(const RequestReaderOptions& options) noexcept {
  detail::ParserLimits limits;
  limits.max_request_line_bytes = options.max_request_line_bytes;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_body_bytes =
      options.max_body_bytes == 0 ? std::numeric_limits<uint64_t>::max() : options.max_body_bytes;
  return limits;
}

Clock::time_point after(EventLoop& loop, uint32_t ms) noexcept {
  return ms == 0 ? Clock::time_point::max() : loop.now() + std::chrono::milliseconds(ms);
}

}  // namespace

RequestReader::RequestReader(TcpConnection& connection, const RequestReaderOptions& options)
    : connection_(connection),
      options_(options),
      parser_(std::make_unique<detail::RequestParser>(limits_of(options))) {
  parser_->set_streaming(true);
  parser_->set_peer(&connection_.peer());
}

RequestReader::~RequestReader() = default;

Request& RequestReader::request() noexcept { return parser_->request(); }

bool RequestReader::expects_continue() const noexcept { return parser_->wants_continue(); }

void RequestReader::continue_sent() noexcept { parser_->continue_sent(); }

std::span<const Header> RequestReader::trailers() const noexcept {
  return parser_->request().trailers();
}

Result<void> RequestReader::refuse(int status, std::string_view reason) noexcept {
  error_status_ = status;
  error_reason_ = reason;
  return Unexpected{make_error_code(std::errc::protocol_error)};
}

Result<void> RequestReader::received(Result<size_t> received) noexcept {
  if (!received) return Unexpected{received.error()};
  if (*received == 0) {
    eof_ = true;
  } else {
    pending_ = {lease_.chars(), lease_.size()};
  }
  return {};
}

Task<RequestReader::Status> RequestReader::next(StopToken stop) {
  using Event = detail::RequestParser::Event;
  if (in_request_) {
    if (!body_complete_) co_return Status::kClosed;  // the caller left a body unread
    parser_->next();
    in_request_ = false;
  }
  error_status_ = 0;
  error_reason_ = {};
  Clock::time_point head_due = Clock::time_point::max();
  for (;;) {
    if (!pending_.empty()) {
      const Event event = parser_->feed(pending_);
      if (event == Event::kHead) {
        ++requests_;
        in_request_ = true;
        body_complete_ = false;
        framing_ = parser_->chunked()              ? BodyFraming::kChunked
                   : parser_->content_length() > 0 ? BodyFraming::kLength
                                                   : BodyFraming::kNone;
        content_length_ = parser_->content_length();
        if (framing_ == BodyFraming::kNone) {
          // Its end is the next step of the parser, without a byte more.
          if (parser_->feed(pending_) == Event::kRequest) body_complete_ = true;
        }
        co_return Status::kRequest;
      }
      if (event == Event::kError) {
        (void)refuse(parser_->error_status(), parser_->error_reason());
        co_return Status::kRefused;
      }
      // kNeedMore: every byte consumed (kBody and kRequest come only after kHead).
    }
    if (eof_) co_return Status::kClosed;  // at most a partial head: nothing to answer
    if (parser_->in_message() && head_due == Clock::time_point::max()) {
      head_due = after(connection_.loop(), options_.header_timeout_ms);  // its first byte came
    }
    if (!parser_->detach_input()) {
      (void)refuse(503, "cannot keep the request's bytes");
      co_return Status::kRefused;
    }
    const Clock::time_point due =
        parser_->in_message()
            ? head_due
            : after(connection_.loop(),
                    requests_ == 0 ? options_.header_timeout_ms : options_.keepalive_timeout_ms);
    if (!parser_->in_message() && stop.stop_requested()) co_return Status::kClosed;
    // Awaited here rather than in a coroutine of its own: one frame less per request.
    lease_.reset();
    pending_ = {};
    auto received =
        this->received(co_await with_stop(with_deadline(connection_.receive_into(lease_), due),
                                          parser_->in_message() ? StopToken() : stop));
    if (!received) {
      if (received.error() == std::errc::timed_out && parser_->in_message()) {
        (void)refuse(408, "request head not complete in time");
        co_return Status::kRefused;
      }
      co_return Status::kClosed;
    }
  }
}

Task<Result<std::string_view>> RequestReader::read_body() {
  using Event = detail::RequestParser::Event;
  if (body_complete_ || !in_request_) co_return std::string_view();
  for (;;) {
    const Event event = parser_->feed(pending_);
    switch (event) {
      case Event::kBody:
        co_return parser_->body_piece();
      case Event::kRequest:
        body_complete_ = true;
        co_return std::string_view();
      case Event::kError:
        co_return Unexpected{refuse(parser_->error_status(), parser_->error_reason()).error()};
      case Event::kHead:
        co_return Unexpected{refuse(400, "a request head inside a body").error()};
      case Event::kNeedMore:
        break;
    }
    if (eof_) co_return Unexpected{make_error_code(std::errc::connection_aborted)};
    if (!parser_->detach_input()) {
      co_return Unexpected{refuse(503, "cannot keep the request's bytes").error()};
    }
    lease_.reset();
    pending_ = {};
    if (auto received = this->received(co_await with_deadline(
            connection_.receive_into(lease_), after(connection_.loop(), options_.body_timeout_ms)));
        !received) {
      if (received.error() == std::errc::timed_out) {
        (void)refuse(408, "request body not received in time");
      }
      co_return Unexpected{received.error()};
    }
    if (eof_) co_return Unexpected{make_error_code(std::errc::connection_aborted)};
  }
}

BufferLease RequestReader::take_unread() noexcept {
  if (pending_.empty()) {
    lease_.reset();
    return {};
  }
  lease_.consume(static_cast<size_t>(pending_.data() - lease_.chars()));
  pending_ = {};
  eof_ = true;  // nothing more is read as HTTP
  return std::move(lease_);
}

}  // namespace ucp::http
