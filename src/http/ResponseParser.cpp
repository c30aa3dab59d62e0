#include "ResponseParser.h"

#include <algorithm>
#include <array>
#include <new>

#include "ucp/http/Status.h"

namespace ucp::http::detail {
namespace {

bool is_whitespace(char c) noexcept { return c == ' ' || c == '\t'; }

}  // namespace

const llhttp_settings_t ResponseParser::kSettings = [] {
  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  settings.on_message_begin = &on_message_begin;
  settings.on_status = &on_status;
  settings.on_header_field = &on_header_field;
  settings.on_header_field_complete = &on_header_field_complete;
  settings.on_header_value = &on_header_value;
  settings.on_header_value_complete = &on_header_value_complete;
  settings.on_headers_complete = &on_headers_complete;
  settings.on_body = &on_body;
  settings.on_chunk_complete = &on_chunk_complete;
  settings.on_message_complete = &on_message_complete;
  return settings;
}();

ResponseParser::ResponseParser(const SessionLimits& limits) noexcept : limits_(limits) {
  llhttp_init(&parser_, HTTP_RESPONSE, &kSettings);
  parser_.data = this;
  complete_ = true;  // nothing expected before start()
}

void ResponseParser::start(bool head_request) noexcept {
  // A connection carries one response after another: llhttp goes on from where the last one
  // ended (after a 101 or an error the connection is not reused).
  head_request_ = head_request;
  complete_ = false;
  head_complete_ = false;
  head_pending_ = body_pending_ = kick_ = false;
  interim_ = 0;
  // The fields' vector keeps its capacity from one response to the next (no allocation per
  // response once it has grown).
  std::vector<Header> headers = std::move(head_.headers);
  headers.clear();
  head_ = ResponseHead();
  head_.headers = std::move(headers);
  trailers_.clear();
  body_piece_ = {};
  in_input_ = false;
  if (head_bytes_.capacity() > 16384) std::string().swap(head_bytes_);
}

int ResponseParser::fail(const char* reason) noexcept {
  if (error_reason_[0] == '\0') error_reason_ = reason;
  failed_ = true;
  return -1;
}

int ResponseParser::fail_too_large(const char* reason) noexcept {
  too_large_ = true;
  return fail(reason);
}

ResponseParser::Event ResponseParser::feed(std::string_view& input) noexcept {
  if (failed_) return Event::kError;
  if (upgraded_ || complete_) return Event::kNeedMore;  // the caller owns what follows
  base_ = input.data();
  // A pause stops llhttp before the step that follows it (the end of a message after its last
  // body piece, say), so after one it runs once more even without new input.
  while (!input.empty() || kick_) {
    kick_ = false;
    ++serial_;
    input_begin_ = input.data();
    input_end_ = input.data() + input.size();
    if (fold_scan_ != FoldScan::kOff && !scan_for_fold(input_begin_)) return Event::kError;
    if (chunk_line_.active()) {
      if (!read_chunk_line(input)) return Event::kError;
      continue;
    }
    static constexpr char kNothing[1] = {};
    const char* data = input.empty() ? kNothing : input.data();
    const llhttp_errno_t error = llhttp_execute(&parser_, data, input.size());
    if (error == HPE_OK) {
      input = {};
      return keep_head_tokens(false) ? Event::kNeedMore : Event::kError;
    }
    if (error != HPE_PAUSED) {
      if (!failed_) {
        const char* reason = llhttp_get_error_reason(&parser_);
        fail(reason != nullptr ? reason : llhttp_errno_name(error));
      }
      return Event::kError;
    }
    const char* position = llhttp_get_error_pos(&parser_);
    llhttp_resume(&parser_);
    if (!input.empty()) input.remove_prefix(static_cast<size_t>(position - input.data()));
    kick_ = true;
    if (head_pending_) {
      head_pending_ = false;
      if (!publish_head()) return Event::kError;
      if (chunk_line_next_) {
        chunk_line_next_ = false;
        chunk_line_.start();
        kick_ = false;  // the chunk line comes next, from the input
      }
      if (upgraded_) kick_ = false;
      return Event::kHead;
    }
    if (body_pending_) {
      body_pending_ = false;
      return Event::kBody;
    }
    if (complete_) {
      kick_ = false;
      return Event::kEnd;
    }
    if (chunk_line_next_) {
      chunk_line_next_ = false;
      chunk_line_.start();
      kick_ = false;
    }
  }
  return keep_head_tokens(false) ? Event::kNeedMore : Event::kError;
}

ResponseParser::Event ResponseParser::finish() noexcept {
  if (failed_) return Event::kError;
  if (complete_) return Event::kEnd;
  if (head_complete_ && head_.framing == BodyFraming::kUntilClose && !chunk_line_.active()) {
    if (llhttp_finish(&parser_) == HPE_OK || complete_) {
      complete_ = true;
      return Event::kEnd;
    }
  }
  fail("the connection closed before the response ended");
  return Event::kError;
}

bool ResponseParser::scan_for_fold(const char* from) noexcept {
  // The common case first, ": v" in this input: the value begins, no fold (what the loop
  // below concludes from those three bytes, without it).
  if (fold_scan_ == FoldScan::kColon && input_end_ - from >= 3 && from[0] == ':' &&
      from[1] == ' ' && from[2] != ' ' && from[2] != '\t' && from[2] != '\r' && from[2] != '\n') {
    fold_scan_ = FoldScan::kOff;
    return true;
  }
  for (const char* p = from; p < input_end_ && fold_scan_ != FoldScan::kOff; ++p) {
    const char c = *p;
    switch (fold_scan_) {
      case FoldScan::kColon:
        fold_scan_ = c == ':' ? FoldScan::kWhitespace : FoldScan::kOff;
        break;
      case FoldScan::kWhitespace:
        if (c == '\n') {
          fold_scan_ = FoldScan::kLineStart;
        } else if (c != ' ' && c != '\t' && c != '\r') {
          fold_scan_ = FoldScan::kOff;
        }
        break;
      case FoldScan::kLineStart:
        fold_scan_ = FoldScan::kOff;
        if (c == ' ' || c == '\t') {
          fail("obsolete line folding");
          return false;
        }
        break;
      case FoldScan::kOff:
        break;
    }
  }
  return true;
}

bool ResponseParser::read_chunk_line(std::string_view& input) noexcept {
  const ChunkLine::Result result = chunk_line_.read(input);
  if (result == ChunkLine::Result::kInvalid) {
    fail(chunk_line_.reason());
    return false;
  }
  if (result == ChunkLine::Result::kMore) return true;
  // llhttp reads the size alone, then the chunk's data and CRLF from the input.
  char line[20];
  size_t length = 0;
  uint64_t size = chunk_line_.size();
  do {
    line[length++] = "0123456789abcdef"[size & 0xF];
    size >>= 4;
  } while (size != 0);
  std::reverse(line, line + length);
  line[length++] = '\r';
  line[length++] = '\n';
  last_chunk_ = chunk_line_.size() == 0;
  const llhttp_errno_t error = llhttp_execute(&parser_, line, length);
  if (error != HPE_OK) {
    const char* reason = llhttp_get_error_reason(&parser_);
    fail(reason != nullptr ? reason : llhttp_errno_name(error));
    return false;
  }
  return true;
}

bool ResponseParser::append(Span& span, const char* at, size_t length, bool extend) noexcept {
  head_size_ += static_cast<uint32_t>(std::min<size_t>(length, UINT32_MAX / 2));
  if (head_size_ > limits_.max_head_bytes) return false;
  if (!head_complete_) {
    const auto from = static_cast<size_t>(at - base_);
    if (!extend && from + length < kInInput) {
      span = {kInInput | static_cast<uint32_t>(from), static_cast<uint32_t>(length)};
      if (!in_input_) first_in_input_ = static_cast<uint32_t>(from);
      in_input_ = true;
      end_in_input_ = static_cast<uint32_t>(from + length);
      return true;
    }
    if (extend && (span.offset & kInInput) != 0) {
      if (head_token(span).data() + span.length == at && from + length < kInInput) {
        span.length += static_cast<uint32_t>(length);
        end_in_input_ = static_cast<uint32_t>(from + length);
        return true;
      }
      // (Not behind its first piece: llhttp gives a token's pieces in order, in one input or
      // at the end of one and the start of the next.)
      if (!keep_head_tokens(false)) return false;
    }
  }
  // Copied: a trailer's piece, or the next piece of a head's token that the end of the last
  // input made keep_head_tokens() copy (the last copied, so this lands right behind it).
  std::string& bytes = head_complete_ ? trailer_bytes_ : head_bytes_;
  if (!extend) span = {static_cast<uint32_t>(bytes.size()), 0};
  try {
    bytes.append(at, length);
  } catch (const std::bad_alloc&) {
    return false;
  }
  span.length += static_cast<uint32_t>(length);
  return true;
}

bool ResponseParser::keep_head_tokens(bool whole) noexcept {
  if (!in_input_) return true;
  in_input_ = false;
  auto for_each_token = [this](auto&& f) {
    if ((status_text_.offset & kInInput) != 0) f(status_text_);
    for (Field& field : fields_) {
      if ((field.name.offset & kInInput) != 0) f(field.name);
      if ((field.value.offset & kInInput) != 0) f(field.value);
    }
  };
  const uint32_t stretch = end_in_input_ - first_in_input_;
  try {
    if (whole && stretch <= limits_.max_head_bytes) {
      // One copy of the head's bytes (a few field separators more than its tokens).
      const auto at = static_cast<uint32_t>(head_bytes_.size());
      head_bytes_.append(base_ + first_in_input_, stretch);
      for_each_token(
          [&](Span& span) { span.offset = (span.offset & ~kInInput) - first_in_input_ + at; });
      return true;
    }
    size_t bytes = 0;
    for_each_token([&](Span& span) { bytes += span.length; });
    head_bytes_.reserve(head_bytes_.size() + bytes);
    for_each_token([&](Span& span) {
      const auto at = static_cast<uint32_t>(head_bytes_.size());
      head_bytes_.append(head_token(span));
      span.offset = at;
    });
  } catch (const std::bad_alloc&) {
    fail("out of memory");
    return false;
  }
  return true;
}

// ---- llhttp callbacks ----

int ResponseParser::on_message_begin(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  if (p.complete_) return p.fail("a response arrived before a request asked for it");
  p.head_bytes_.clear();
  p.fields_.clear();
  p.status_text_ = {};
  p.open_ = Token::kNone;
  p.fold_scan_ = FoldScan::kOff;
  p.head_size_ = 0;
  p.in_input_ = false;
  p.transfer_encoding_count_ = 0;
  p.transfer_encoding_chunked_ = false;
  p.last_chunk_ = false;
  return 0;
}

int ResponseParser::on_status(llhttp_t* parser, const char* at, size_t length) noexcept {
  ResponseParser& p = self(parser);
  const bool extend = p.open_ == Token::kStatus;
  p.open_ = Token::kStatus;
  if (!p.append(p.status_text_, at, length, extend)) {
    return p.fail_too_large("response head too large");
  }
  return 0;
}

int ResponseParser::on_header_field(llhttp_t* parser, const char* at, size_t length) noexcept {
  ResponseParser& p = self(parser);
  std::vector<Field>& fields = p.head_complete_ ? p.trailer_fields_ : p.fields_;
  const bool extend = p.open_ == Token::kField;
  if (!extend) {
    if (fields.size() >= p.limits_.max_headers) {
      return p.fail_too_large("too many header fields in the response");
    }
    try {
      fields.emplace_back();
    } catch (const std::bad_alloc&) {
      return p.fail("out of memory");
    }
    p.head_size_ += 4;  // ": " and CRLF
  }
  p.open_ = Token::kField;
  p.name_end_ = at + length;
  p.name_serial_ = p.serial_;
  if (!p.append(fields.back().name, at, length, extend)) {
    return p.fail_too_large("response head too large");
  }
  return 0;
}

int ResponseParser::on_header_field_complete(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  p.open_ = Token::kNone;
  const std::vector<Field>& fields = p.head_complete_ ? p.trailer_fields_ : p.fields_;
  if (fields.back().name.length == 0) return p.fail("empty field name");
  // llhttp skips whitespace, a line end and more whitespace after the colon without a word,
  // so a fold after an empty value would reach us as a plain value: read those bytes here.
  p.fold_scan_ = FoldScan::kColon;
  return p.scan_for_fold(p.name_serial_ == p.serial_ ? p.name_end_ : p.input_begin_) ? 0 : -1;
}

int ResponseParser::on_header_value(llhttp_t* parser, const char* at, size_t length) noexcept {
  ResponseParser& p = self(parser);
  const bool extend = p.open_ == Token::kValue;
  // A value goes on in a second piece only when the first ended its input and this one starts
  // the next; anything else is an obs-fold continuation line, which is refused.
  if (extend && (p.value_serial_ == p.serial_ || !p.value_at_end_ || at != p.input_begin_)) {
    return p.fail("obsolete line folding");
  }
  p.open_ = Token::kValue;
  p.value_serial_ = p.serial_;
  p.value_at_end_ = at + length == p.input_end_;
  std::vector<Field>& fields = p.head_complete_ ? p.trailer_fields_ : p.fields_;
  if (!p.append(fields.back().value, at, length, extend)) {
    return p.fail_too_large("response head too large");
  }
  return 0;
}

int ResponseParser::on_header_value_complete(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  std::vector<Field>& fields = p.head_complete_ ? p.trailer_fields_ : p.fields_;
  Field& field = fields.back();
  if (p.open_ != Token::kValue) field.value = {};
  p.open_ = Token::kNone;
  if (p.head_complete_) {
    const std::string& bytes = p.trailer_bytes_;
    while (field.value.length > 0 &&
           is_whitespace(bytes[field.value.offset + field.value.length - 1])) {
      --field.value.length;  // llhttp drops leading whitespace only
    }
    return 0;
  }
  std::string_view value = p.head_token(field.value);
  while (!value.empty() && is_whitespace(value.back())) value.remove_suffix(1);
  field.value.length = static_cast<uint32_t>(value.size());
  if (field.name.length == 17) {  // (no call for the other names)
    if (iequals(p.head_token(field.name), "transfer-encoding")) {
      ++p.transfer_encoding_count_;
      p.transfer_encoding_chunked_ = iequals(value, "chunked");
    }
  }
  return 0;
}

int ResponseParser::on_headers_complete(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  if (p.head_complete_) return 0;  // the end of the trailers
  if (parser->http_major != 1) return p.fail("not an HTTP/1.x response");
  const int status = parser->status_code;
  if (status < 100 || status > 999) return p.fail("invalid status code");
  if (status >= 100 && status < 200 && status != 101) {
    if (++p.interim_ > kMaxInterim) return p.fail("too many interim (1xx) responses");
    return 0;  // llhttp ends it here; the real response follows
  }
  // RFC 9112 §6: a length that could be read two ways is refused, never guessed.
  if (p.transfer_encoding_count_ > 0) {
    if (p.transfer_encoding_count_ > 1 || !p.transfer_encoding_chunked_) {
      return p.fail("Transfer-Encoding other than chunked");
    }
    if ((parser->flags & F_CONTENT_LENGTH) != 0) {
      return p.fail("Content-Length together with Transfer-Encoding");
    }
  }
  ResponseHead& head = p.head_;
  head.status = status;
  head.version_minor = parser->http_minor;
  const bool no_body = p.head_request_ || status_has_no_body(status) || status == 101;
  if (no_body) {
    head.framing = BodyFraming::kNone;
    if ((parser->flags & F_CONTENT_LENGTH) != 0) head.content_length = parser->content_length;
    if (p.head_request_) parser->flags |= F_SKIPBODY;  // what returning 1 would have said
  } else if ((parser->flags & F_CHUNKED) != 0) {
    head.framing = BodyFraming::kChunked;
    p.chunk_line_next_ = true;
  } else if ((parser->flags & F_CONTENT_LENGTH) != 0) {
    head.framing = BodyFraming::kLength;
    head.content_length = parser->content_length;
  } else {
    head.framing = BodyFraming::kUntilClose;
  }
  // llhttp_should_keep_alive() without its look at the framing, decided above (a body until
  // the close is never kept alive; every other framing is one it would keep): HTTP/1.1 unless
  // "close", HTTP/1.0 only with "keep-alive".
  const bool keep = parser->http_minor > 0 ? (parser->flags & F_CONNECTION_CLOSE) == 0
                                           : (parser->flags & F_CONNECTION_KEEP_ALIVE) != 0;
  head.keep_alive = head.framing != BodyFraming::kUntilClose && status != 101 && keep;
  p.head_complete_ = true;
  p.head_pending_ = true;
  p.head_size_ = 0;  // trailers have a budget of their own
  p.trailer_bytes_.clear();
  p.trailer_fields_.clear();
  if (status == 101) p.upgraded_ = true;  // nothing more is HTTP
  return HPE_PAUSED;
}

int ResponseParser::on_body(llhttp_t* parser, const char* at, size_t length) noexcept {
  ResponseParser& p = self(parser);
  if (length == 0) return 0;
  p.body_piece_ = {at, length};
  p.body_pending_ = true;
  return HPE_PAUSED;
}

int ResponseParser::on_chunk_complete(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  if (p.last_chunk_) return 0;  // after the trailers: the message is complete
  p.chunk_line_next_ = true;
  return HPE_PAUSED;
}

int ResponseParser::on_message_complete(llhttp_t* parser) noexcept {
  ResponseParser& p = self(parser);
  if (!p.head_complete_) return 0;  // an interim 1xx: the response is still to come
  if (!p.publish_trailers()) return -1;
  p.complete_ = true;
  return HPE_PAUSED;
}

// The head's and the trailers' views are made only once they are complete: appending to their
// storage before could move it.
bool ResponseParser::publish_head() noexcept {
  if (!keep_head_tokens(true)) return false;
  head_.reason = {head_bytes_.data() + status_text_.offset, status_text_.length};
  try {
    head_.headers.clear();
    head_.headers.reserve(fields_.size());
    for (const Field& f : fields_) {
      head_.headers.push_back({{head_bytes_.data() + f.name.offset, f.name.length},
                               {head_bytes_.data() + f.value.offset, f.value.length}});
    }
  } catch (const std::bad_alloc&) {
    fail("out of memory");
    return false;
  }
  return true;
}

bool ResponseParser::publish_trailers() noexcept {
  try {
    trailers_.clear();
    for (const Field& f : trailer_fields_) {
      trailers_.push_back({{trailer_bytes_.data() + f.name.offset, f.name.length},
                           {trailer_bytes_.data() + f.value.offset, f.value.length}});
    }
  } catch (const std::bad_alloc&) {
    fail("out of memory");
    return false;
  }
  return true;
}

}  // namespace ucp::http::detail
