// One file for one state machine (~700 lines): the feeding and buffering half and the
// llhttp callbacks below read and write the same per-request state (the views into the
// input, the tail buffer, the framing checks), and every smuggling defence is a check across
// both halves; split, each half would need the other's private state. Chunk lines are
// their own grammar and live in ChunkLine.cpp.

#include "RequestParser.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>

namespace ucp::http::detail {
namespace {

constexpr std::string_view kWhitespace = " \t";

std::string_view trim(std::string_view text) noexcept {
  const size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return text.substr(0, 0);
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

std::string_view trim_trailing(std::string_view text) noexcept {
  const size_t last = text.find_last_not_of(kWhitespace);
  return last == std::string_view::npos ? text.substr(0, 0) : text.substr(0, last + 1);
}

/// Calls `f(token)` for each element of a comma-separated list (RFC 9110 §5.6.1), skipping
/// empty elements.
template <class F>
void for_each_token(std::string_view list, F&& f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view token = trim(list.substr(0, comma));
    if (!token.empty()) f(token);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

/// A 256-entry membership table, built at compile time.
struct CharSet {
  bool member[256] = {};
  constexpr CharSet(std::string_view extra, bool alphanumerics) {
    for (int c = 0; c < 256; ++c) {
      member[c] = alphanumerics &&
                  ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    }
    for (const char c : extra) member[static_cast<unsigned char>(c)] = true;
  }
  constexpr bool operator()(char c) const noexcept { return member[static_cast<unsigned char>(c)]; }
};

// uri-host [ ":" port ] (RFC 3986): unreserved, pct-encoded, sub-delims, ':' and the
// brackets of an IP-literal.
constexpr CharSet kHostChars("-._~!$&'()*+,;=%:[]", true);

/// uri-host [ ":" port ]: reg-name, IPv4 or an IP-literal. Loose on structure, strict on
/// characters: nothing that could end a field or smuggle a path in.
bool valid_host(std::string_view host) noexcept {
  for (const char c : host) {
    if (!kHostChars(c)) return false;
  }
  return true;
}

/// Length of each llhttp method name, so the request line is measured without strlen.
size_t method_length(uint8_t method) noexcept {
  static constexpr auto lengths = [] {
    std::array<uint8_t, 256> table{};
#define UCP_METHOD_LENGTH(number, name, text) table[number] = sizeof(#text) - 1;
    HTTP_ALL_METHOD_MAP(UCP_METHOD_LENGTH)
#undef UCP_METHOD_LENGTH
    return table;
  }();
  return lengths[method];
}

bool starts_with_ci(std::string_view text, std::string_view prefix) noexcept {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

/// The authority of an absolute-form target ("http://host:80/p" -> "host:80") and what
/// follows it, or nullopt-like false when `target` is not absolute-form.
bool split_absolute(std::string_view target, std::string_view& authority,
                    std::string_view& rest) noexcept {
  size_t scheme = 0;
  if (starts_with_ci(target, "http://")) {
    scheme = 7;
  } else if (starts_with_ci(target, "https://")) {
    scheme = 8;
  } else {
    return false;
  }
  const std::string_view after = target.substr(scheme);
  const size_t end = after.find_first_of("/?");
  authority = after.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : after.substr(end);
  return true;
}

}  // namespace

const llhttp_settings_t RequestParser::kSettings = [] {
  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  settings.on_message_begin = &on_message_begin;
  settings.on_url = &on_url;
  settings.on_url_complete = &on_url_complete;
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

RequestParser::RequestParser(const ParserLimits& limits) noexcept : limits_(limits) {
  init_llhttp();
}

void RequestParser::init_llhttp() noexcept {
  llhttp_init(&parser_, HTTP_REQUEST, &kSettings);
  parser_.data = this;
  // Any single-digit version gets through llhttp; check_head() answers it (RFC 9110 §2.5:
  // HTTP/1.2 is processed as HTTP/1.1; other majors 505). llhttp 8.1 has the flag but no
  // setter for it.
  parser_.lenient_flags |= LENIENT_VERSION;
}

int RequestParser::fail(int status, const char* reason) noexcept {
  if (error_status_ == 0) {
    error_status_ = status;
    error_reason_ = reason;
  }
  return -1;  // llhttp stops with an error; feed() reports ours
}

RequestParser::Event RequestParser::feed(std::string_view& input) noexcept {
  if (error_status_ != 0) return Event::kError;
  // Streaming pauses llhttp before the step that follows a head or a body piece (the end of a
  // request without a body, say): after one it runs once more even without new input.
  while (!input.empty() || kick_) {
    kick_ = false;
    ++serial_;
    input_begin_ = input.data();
    input_end_ = input.data() + input.size();
    if (fold_scan_ != FoldScan::kOff && !scan_for_fold(input_begin_)) return Event::kError;
    if (open_ == Token::kUrl && url_at_end_ && !input.empty() &&
        (input.front() == '\r' || input.front() == '\n')) {
      fail(400, "request line without HTTP/1.x version");  // HTTP/0.9: below, across inputs
      return Event::kError;
    }
    if (chunk_line_.active()) {
      if (!read_chunk_line(input)) return Event::kError;
      continue;
    }
    static constexpr char kNothing[1] = {};
    const char* data = input.empty() ? kNothing : input.data();
    const llhttp_errno_t error = llhttp_execute(&parser_, data, input.size());
    if (error == HPE_OK) {
      // The target's last piece ended at a CR or LF: an HTTP/0.9 request line, which llhttp
      // would answer only after a header block that never comes.
      if (open_ == Token::kUrl && url_serial_ == serial_ && url_end_ < input_end_ &&
          (*url_end_ == '\r' || *url_end_ == '\n')) {
        fail(400, "request line without HTTP/1.x version");
        return Event::kError;
      }
      input = {};
      return Event::kNeedMore;
    }
    const char* position = llhttp_get_error_pos(&parser_);
    if (error == HPE_PAUSED && (head_ready_ || body_ready_)) {  // streaming
      llhttp_resume(&parser_);
      if (!input.empty()) input.remove_prefix(static_cast<size_t>(position - input.data()));
      kick_ = true;
      if (head_ready_) {
        head_ready_ = false;
        if (chunk_line_next_) {  // the first chunk-size line comes next, from the input
          chunk_line_next_ = false;
          chunk_line_.start();
          kick_ = false;
        }
        return Event::kHead;
      }
      body_ready_ = false;
      return Event::kBody;
    }
    if (error == HPE_PAUSED && chunk_line_next_) {  // a chunk-size line is next: ours to read
      chunk_line_next_ = false;
      llhttp_resume(&parser_);
      input.remove_prefix(static_cast<size_t>(position - input.data()));
      chunk_line_.start();
      continue;
    }
    if (error == HPE_PAUSED) {  // on_message_complete: one whole request
      llhttp_resume(&parser_);
      if (!input.empty()) input.remove_prefix(static_cast<size_t>(position - input.data()));
      return Event::kRequest;
    }
    if (error == HPE_PAUSED_UPGRADE) {
      // An Upgrade request was answered as plain HTTP (a server may ignore Upgrade): go on
      // parsing what follows as HTTP. CONNECT never gets here (refused in check_head).
      llhttp_resume_after_upgrade(&parser_);
      input.remove_prefix(static_cast<size_t>(position - input.data()));
      continue;
    }
    if (error_status_ == 0) {
      const char* reason = llhttp_get_error_reason(&parser_);
      fail(400, reason != nullptr ? reason : llhttp_errno_name(error));
    }
    return Event::kError;
  }
  return Event::kNeedMore;
}

void RequestParser::rewind() noexcept {
  init_llhttp();
  fold_scan_ = FoldScan::kOff;
  chunk_line_ = ChunkLine();
  chunk_line_next_ = false;
  next();
}

bool RequestParser::scan_for_fold(const char* from) noexcept {
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
      case FoldScan::kColon:  // llhttp strict: the name ends at the colon
        fold_scan_ = c == ':' ? FoldScan::kWhitespace : FoldScan::kOff;
        break;
      case FoldScan::kWhitespace:  // OWS, and the CR of an empty value's line end
        if (c == '\n') {
          fold_scan_ = FoldScan::kLineStart;
        } else if (c != ' ' && c != '\t' && c != '\r') {
          fold_scan_ = FoldScan::kOff;  // the value begins
        }
        break;
      case FoldScan::kLineStart:  // the next field, or the end of the head
        if (c == ' ' || c == '\t') {
          fold_scan_ = FoldScan::kOff;
          fail(400, "obsolete line folding");
          return false;
        }
        fold_scan_ = FoldScan::kOff;
        break;
      case FoldScan::kOff:
        break;
    }
  }
  return true;
}

bool RequestParser::read_chunk_line(std::string_view& input) noexcept {
  const size_t before = input.size();
  const ChunkLine::Result result = chunk_line_.read(input);
  framing_bytes_ += before - input.size();
  if (result == ChunkLine::Result::kInvalid) {
    fail(400, chunk_line_.reason());
    return false;
  }
  if (extension_bytes_ + chunk_line_.extension_bytes() > kMaxChunkExtensionBytes) {
    fail(400, "chunk extensions too long");
    return false;
  }
  if (!check_framing()) return false;
  if (result == ChunkLine::Result::kMore) return true;
  extension_bytes_ += chunk_line_.extension_bytes();
  // llhttp reads the size alone, in hex, and then the chunk's data and CRLF from the input.
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
    fail(400, reason != nullptr ? reason : llhttp_errno_name(error));
    return false;
  }
  return true;
}

void RequestParser::next() noexcept {
  // The strings of the answered request are no longer needed; the parser itself already
  // stands at the start of the next request (on_message_begin resets the rest).
  tail_size_ = 0;
  tail_mode_ = false;
  body_copy_.clear();
  body_copied_ = false;
}

// ---- spans ----
//
// llhttp hands each token (target, field name, field value) over in pieces: one per feed()
// unless the token continues into the next input. On the common path a piece is simply a
// view into the input. Once the input of an unfinished request is detached, the request's
// tokens live compacted in tail_, and later pieces are appended right behind them, so a
// token that continues across inputs stays contiguous.

bool RequestParser::reserve_tail(size_t more) noexcept {
  if (tail_size_ + more <= tail_capacity_) return true;
  // Bounded: the limits stop a request before its tokens exceed them.
  const size_t bound =
      size_t{limits_.max_request_line_bytes} + 2 * size_t{limits_.max_header_bytes};
  size_t capacity = std::max<size_t>(tail_capacity_ * 2, 512);
  capacity = std::max(capacity, tail_size_ + more);
  capacity = std::min(capacity, std::max(bound, tail_size_ + more));
  std::unique_ptr<char[]> grown(new (std::nothrow) char[capacity]);
  if (!grown) return false;
  const char* old_begin = tail_.get();
  if (tail_size_ > 0) std::memcpy(grown.get(), old_begin, tail_size_);
  auto rebase = [&](std::string_view& view) {
    if (!view.empty() && view.data() >= old_begin && view.data() < old_begin + tail_size_) {
      view = {grown.get() + (view.data() - old_begin), view.size()};
    }
  };
  rebase(request_.target_);
  Header* fields = request_.fields();
  for (uint32_t i = 0; i < request_.header_count_ + request_.trailer_count_; ++i) {
    rebase(fields[i].name);
    rebase(fields[i].value);
  }
  tail_ = std::move(grown);
  tail_capacity_ = capacity;
  if (streaming_ && head_complete_) finish_target();  // its views moved with the tokens
  return true;
}

bool RequestParser::append(std::string_view& span, std::string_view piece, bool extend) noexcept {
  if (!tail_mode_) {
    // A piece of the input. A token continues into a later input only after
    // detach_input(), so an extension here must be contiguous; anything else means the
    // caller released an input without detaching it, and nothing may be joined across it.
    if (!extend) {
      span = piece;
      return true;
    }
    if (span.data() + span.size() != piece.data()) return false;
    span = {span.data(), span.size() + piece.size()};
    return true;
  }
  if (!reserve_tail(piece.size())) return false;
  char* at = tail_.get() + tail_size_;
  if (!piece.empty()) std::memcpy(at, piece.data(), piece.size());
  tail_size_ += piece.size();
  span = extend ? std::string_view(span.data(), span.size() + piece.size())
                : std::string_view(at, piece.size());
  return true;
}

bool RequestParser::detach_input() noexcept {
  if (!in_message_) return true;
  if (!tail_mode_) {
    // Copy the request's tokens so far, compacted, in order; the open token is the last,
    // so its next piece will land right behind it.
    Header* fields = request_.fields();
    const uint32_t count = request_.header_count_ + request_.trailer_count_;
    size_t bytes = request_.target_.size();
    for (uint32_t i = 0; i < count; ++i) bytes += fields[i].name.size() + fields[i].value.size();
    tail_size_ = 0;
    if (!reserve_tail(bytes)) return false;
    auto move_in = [this](std::string_view& view) {
      char* at = tail_.get() + tail_size_;
      if (!view.empty()) std::memcpy(at, view.data(), view.size());
      view = {at, view.size()};
      tail_size_ += view.size();
    };
    move_in(request_.target_);
    for (uint32_t i = 0; i < count; ++i) {
      move_in(fields[i].name);
      move_in(fields[i].value);
    }
    tail_mode_ = true;
    if (streaming_ && head_complete_) finish_target();  // its views moved with the tokens
  }
  if (!body_copied_ && !body_in_place_.empty()) {
    body_copy_.assign(body_in_place_);
    body_in_place_ = {};
    body_copied_ = true;  // later pieces are appended to body_copy_
  }
  return true;
}

// ---- llhttp callbacks ----

int RequestParser::on_message_begin(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  Request& r = p.request_;
  r.target_ = r.path_ = r.query_ = r.host_ = r.body_ = {};
  r.header_count_ = r.trailer_count_ = r.param_count_ = r.id_size_ = 0;
  p.open_ = Token::kNone;
  p.line_bytes_ = p.header_bytes_ = p.trailer_bytes_ = p.extension_bytes_ = 0;
  p.body_bytes_ = p.framing_bytes_ = 0;
  p.fold_scan_ = FoldScan::kOff;
  p.last_chunk_ = false;
  p.host_count_ = p.transfer_encoding_count_ = 0;
  p.transfer_encoding_chunked_ = p.connection_close_ = p.connection_keep_alive_ = false;
  p.expect_continue_ = p.expect_other_ = false;
  p.host_index_ = -1;
  p.in_message_ = true;
  p.head_complete_ = false;
  p.wants_continue_ = false;
  p.body_in_place_ = {};
  p.body_piece_ = {};
  p.head_ready_ = p.body_ready_ = false;
  return 0;
}

int RequestParser::on_url(llhttp_t* parser, const char* at, size_t length) noexcept {
  RequestParser& p = self(parser);
  // The request line: method SP target SP HTTP/1.x CRLF.
  if (p.line_bytes_ == 0) p.line_bytes_ = static_cast<uint32_t>(method_length(parser->method) + 12);
  p.line_bytes_ += static_cast<uint32_t>(std::min<size_t>(length, UINT32_MAX / 2));
  if (p.line_bytes_ > p.limits_.max_request_line_bytes) return p.fail(414, "request line too long");
  const bool extend = p.open_ == Token::kUrl;
  p.open_ = Token::kUrl;
  p.url_end_ = at + length;
  p.url_serial_ = p.serial_;
  p.url_at_end_ = p.url_end_ == p.input_end_;
  if (!p.append(p.request_.target_, {at, length}, extend))
    return p.fail(503, "cannot keep the request's bytes");
  return 0;
}

int RequestParser::on_url_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  p.open_ = Token::kNone;
  // llhttp ends an HTTP/0.9 request line (no version) by making the version 0.9 just before
  // this callback; it would go on to read a header block. (A version that follows the target
  // is read only after this callback, so 0.9 here is never a previous request's.)
  if (parser->http_major == 0 && parser->http_minor == 9) {
    return p.fail(400, "request line without HTTP/1.x version");
  }
  return 0;
}

int RequestParser::on_header_field(llhttp_t* parser, const char* at, size_t length) noexcept {
  RequestParser& p = self(parser);
  Request& r = p.request_;
  uint32_t& budget = p.head_complete_ ? p.trailer_bytes_ : p.header_bytes_;
  const bool extend = p.open_ == Token::kField;
  if (!extend) {
    if (r.header_count_ + r.trailer_count_ >= Request::kMaxHeaders) {
      return p.fail(431, "too many header fields");
    }
    ::new (&r.fields()[r.header_count_ + r.trailer_count_]) Header{};
    (p.head_complete_ ? r.trailer_count_ : r.header_count_) += 1;
    budget += 4;  // ": " and CRLF
  }
  budget += static_cast<uint32_t>(std::min<size_t>(length, UINT32_MAX / 2));
  if (budget > p.limits_.max_header_bytes) return p.fail(431, "header fields too large");
  p.open_ = Token::kField;
  p.name_end_ = at + length;
  p.name_serial_ = p.serial_;
  if (!p.append(p.current_field().name, {at, length}, extend))
    return p.fail(503, "cannot keep the request's bytes");
  return 0;
}

int RequestParser::on_header_field_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  p.open_ = Token::kNone;
  if (p.current_field().name.empty()) return p.fail(400, "empty field name");  // RFC 9112 §5.1
  p.fold_scan_ = FoldScan::kColon;
  return p.scan_for_fold(p.name_serial_ == p.serial_ ? p.name_end_ : p.input_begin_) ? 0 : -1;
}

int RequestParser::on_header_value(llhttp_t* parser, const char* at, size_t length) noexcept {
  RequestParser& p = self(parser);
  const bool extend = p.open_ == Token::kValue;
  // llhttp accepts obs-fold (a value continued on a line that starts with whitespace) and
  // hands the continuation over as another piece of the same value; RFC 9112 §5.2 lets us
  // refuse it. A genuine continuation is the previous input's last bytes followed by this
  // input's first: anything else is a fold, even one split across inputs.
  if (extend && (p.open_serial_ == p.serial_ || !p.open_reached_end_ || at != p.input_begin_)) {
    return p.fail(400, "obsolete line folding");
  }
  uint32_t& budget = p.head_complete_ ? p.trailer_bytes_ : p.header_bytes_;
  budget += static_cast<uint32_t>(std::min<size_t>(length, UINT32_MAX / 2));
  if (budget > p.limits_.max_header_bytes) return p.fail(431, "header fields too large");
  p.open_ = Token::kValue;
  p.open_serial_ = p.serial_;
  p.open_reached_end_ = at + length == p.input_end_;
  if (!p.append(p.current_field().value, {at, length}, extend))
    return p.fail(503, "cannot keep the request's bytes");
  return 0;
}

int RequestParser::on_header_value_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  Header& field = p.current_field();
  if (p.open_ != Token::kValue) field.value = {};
  field.value = trim_trailing(field.value);  // llhttp drops leading whitespace only
  p.open_ = Token::kNone;
  if (!p.head_complete_) p.note_header(field);
  return 0;
}

void RequestParser::note_header(const Header& header) noexcept {
  // Only the fields whose meaning the server itself depends on; compared by length first.
  const std::string_view name = header.name;
  switch (name.size()) {
    case 4:
      if (iequals(name, "host")) {
        ++host_count_;
        host_index_ = static_cast<int>(&header - request_.fields());
      }
      break;
    case 6:
      if (iequals(name, "expect")) {
        if (iequals(header.value, "100-continue")) {
          expect_continue_ = true;
        } else {
          expect_other_ = true;
        }
      }
      break;
    case 10:
      if (iequals(name, "connection")) {
        for_each_token(header.value, [this](std::string_view token) {
          if (iequals(token, "close")) connection_close_ = true;
          if (iequals(token, "keep-alive")) connection_keep_alive_ = true;
        });
      }
      break;
    case 17:
      if (iequals(name, "transfer-encoding")) {
        ++transfer_encoding_count_;
        transfer_encoding_chunked_ = iequals(header.value, "chunked");
      }
      break;
    default:
      break;
  }
}

int RequestParser::on_headers_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  if (const int refused = p.check_head(); refused != 0) return refused;
  p.head_complete_ = true;
  if ((parser->flags & F_CHUNKED) != 0) p.chunk_line_next_ = true;  // feed() reads the size line
  if (p.streaming_) {
    p.finish_target();
    p.head_ready_ = true;  // feed() reports the head before any of the body
    return HPE_PAUSED;
  }
  return p.chunk_line_next_ ? HPE_PAUSED : 0;
}

int RequestParser::check_head() noexcept {
  Request& r = request_;
  const llhttp_t& ll = parser_;
  if (ll.http_major != 1) {
    return ll.http_major == 0 ? fail(400, "request line without HTTP/1.x version")
                              : fail(505, "HTTP version not supported");
  }
  r.version_minor_ = std::min<uint8_t>(ll.http_minor, 1);  // 1.2..1.9: as 1.1 (RFC 9110 §2.5)
  r.method_name_ = llhttp_method_name(static_cast<llhttp_method_t>(ll.method));
  r.method_ = method_from_string(r.method_name_);
  if (r.method_ == Method::kConnect) return fail(501, "CONNECT is not supported");

  // RFC 9112 §3.2: exactly one Host in HTTP/1.1, and never two.
  if (host_count_ > 1) return fail(400, "more than one Host header");
  if (host_count_ == 0 && r.version_minor_ >= 1) return fail(400, "HTTP/1.1 request without Host");
  if (host_index_ >= 0 && !valid_host(r.fields()[host_index_].value)) {
    return fail(400, "invalid Host header");
  }

  // The request-target: origin-form, absolute-form, or "*" for OPTIONS (§3.2). llhttp
  // already refused control bytes, but the target is re-checked here: it becomes a path.
  const std::string_view target = r.target_;
  for (const char c : target) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7F) return fail(400, "control character in request target");
    if (c == '#') return fail(400, "fragment in request target");
  }
  std::string_view authority;
  std::string_view rest;
  if (target.empty()) return fail(400, "empty request target");
  if (target == "*") {
    if (r.method_ != Method::kOptions) return fail(400, "'*' target outside OPTIONS");
  } else if (target.front() != '/') {
    if (!split_absolute(target, authority, rest)) return fail(400, "invalid request target");
    if (!valid_host(authority)) return fail(400, "invalid authority in request target");
  }

  // Body framing (§6): llhttp refused Content-Length with Transfer-Encoding, duplicate or
  // malformed Content-Length; a Transfer-Encoding must be exactly one "chunked".
  if (transfer_encoding_count_ > 0) {
    if (transfer_encoding_count_ > 1 || !transfer_encoding_chunked_) {
      return fail(400, "Transfer-Encoding other than chunked");
    }
  }
  if ((ll.flags & F_CONTENT_LENGTH) != 0 && ll.content_length > limits_.max_body_bytes) {
    return fail(413, "Content-Length above max_body_bytes");
  }
  const bool has_body = (ll.flags & F_CHUNKED) != 0 || ll.content_length > 0;
  if (expect_other_) return fail(417, "unsupported expectation");
  wants_continue_ = expect_continue_ && has_body && r.version_minor_ >= 1;

  // Keep-alive (§9.3): HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive". An
  // HTTP/1.0 request with Transfer-Encoding has faulty framing: answer it, then close
  // (§6.1). llhttp's own verdict is kept too: it never continues after "close".
  const bool keep =
      r.version_minor_ >= 1 ? !connection_close_ : connection_keep_alive_ && !connection_close_;
  r.keep_alive_ = keep && !(r.version_minor_ == 0 && transfer_encoding_count_ > 0) &&
                  llhttp_should_keep_alive(&parser_) != 0;
  return 0;
}

int RequestParser::on_body(llhttp_t* parser, const char* at, size_t length) noexcept {
  RequestParser& p = self(parser);
  p.body_bytes_ += length;
  if (p.body_bytes_ > p.limits_.max_body_bytes) return p.fail(413, "body above max_body_bytes");
  const std::string_view piece(at, length);
  if (p.streaming_) {
    if (length == 0) return 0;
    p.body_piece_ = piece;
    p.body_ready_ = true;  // feed() hands it over before going on
    return HPE_PAUSED;
  }
  if (p.body_copied_) {
    p.body_copy_.append(piece);
  } else if (p.body_in_place_.empty()) {
    p.body_in_place_ = piece;
  } else if (p.body_in_place_.data() + p.body_in_place_.size() == at) {
    p.body_in_place_ = {p.body_in_place_.data(), p.body_in_place_.size() + length};
  } else {  // a second chunk: the body is no longer one piece of the input
    p.body_copy_.reserve(std::min<uint64_t>(p.body_bytes_ * 2, p.limits_.max_body_bytes));
    p.body_copy_.assign(p.body_in_place_);
    p.body_copy_.append(piece);
    p.body_in_place_ = {};
    p.body_copied_ = true;
  }
  return 0;
}

bool RequestParser::check_framing() noexcept {
  if (framing_bytes_ > kFramingAllowanceBytes && framing_bytes_ > 4 * body_bytes_) {
    fail(400, "chunked framing outweighs the data it frames");
    return false;
  }
  return true;
}

int RequestParser::on_chunk_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  if (p.last_chunk_) return 0;  // after the trailers: the message is complete
  p.framing_bytes_ += 2;        // the CRLF after the chunk's data
  if (!p.check_framing()) return -1;
  p.chunk_line_next_ = true;
  return HPE_PAUSED;
}

int RequestParser::on_message_complete(llhttp_t* parser) noexcept {
  RequestParser& p = self(parser);
  p.finish_request();
  p.in_message_ = false;
  p.wants_continue_ = false;
  return HPE_PAUSED;  // feed() returns this one request
}

void RequestParser::finish_request() noexcept {
  // Views derived from the tokens are made only now: until the request is complete a
  // detach could still move the tokens. (Streaming made them with the head, which a detach
  // no longer moves: its tokens are in the tail by then.)
  Request& r = request_;
  r.body_ = body_copied_ ? std::string_view(body_copy_) : body_in_place_;
  if (!streaming_) finish_target();
}

void RequestParser::finish_target() noexcept {
  Request& r = request_;
  r.host_ = r.query_ = {};
  std::string_view authority;
  std::string_view rest;
  if (r.target_ == "*") {
    r.path_ = r.target_;
  } else if (split_absolute(r.target_, authority, rest)) {
    r.host_ = authority;
    r.path_ = rest.substr(0, rest.find('?'));
    if (r.path_.empty()) r.path_ = "/";
    if (const size_t q = rest.find('?'); q != std::string_view::npos) r.query_ = rest.substr(q + 1);
  } else {
    const size_t q = r.target_.find('?');
    r.path_ = r.target_.substr(0, q);
    if (q != std::string_view::npos) r.query_ = r.target_.substr(q + 1);
  }
  if (r.host_.empty() && host_index_ >= 0) r.host_ = r.fields()[host_index_].value;
}

}  // namespace ucp::http::detail
