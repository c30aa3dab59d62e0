#pragma once
// RequestParser: frames HTTP/1.1 requests out of a connection's byte stream with llhttp in
// strict mode, and applies the checks RFC 9112 asks of a server that llhttp leaves to its
// caller (exactly one Host, Transfer-Encoding exactly "chunked", no obs-fold, no empty field
// name, token-list Connection, Expect, request-target forms, HTTP/0.9 refused at the end of
// its line, HTTP/1.x above 1.1 read as 1.1) and the size limits (414, 431, 413). Chunk-size
// lines are read by ChunkLine, which knows the whole extension grammar; llhttp sees only
// the sizes.
//
// No copies on the common path: a request's strings are views into the caller's input.
// Only when the input is about to be released with a request unfinished (detach_input) are
// that request's strings copied into a tail buffer bounded by the limits; the rest of it
// is then appended there as it arrives. A body that is not one contiguous piece of the
// input (chunked, or split across reads) is copied into a buffer bounded by max_body_bytes.
//
//   for (;;) {                              // per received buffer
//     auto event = parser.feed(input);      // consumes from `input`
//     if (event == kNeedMore) break;        // then detach_input() before releasing it
//     if (event == kError) { answer parser.error_status(); close; }
//     handle(parser.request()); parser.next();
//   }
//
// Streaming (set_streaming(true), for a proxy that passes bodies on as they come): feed() also
// reports kHead once a request's head is complete (its strings valid, its body empty) and
// each piece of its body as kBody (body_piece(), a view into the input: nothing is copied or
// held), then kRequest at its end (with its trailers). max_body_bytes still applies.
//
// Thread contract: one thread at a time. Not movable (llhttp keeps a pointer to it).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <llhttp.h>

#include "ucp/http/Request.h"

#include "ChunkLine.h"

namespace ucp::http::detail {

struct ParserLimits {
  uint32_t max_request_line_bytes = 8192;  // method, target and version: else 414
  uint32_t max_header_bytes = 16384;       // header fields (also trailers): else 431
  uint64_t max_body_bytes = 1048576;       // Content-Length or de-chunked size: else 413

  bool operator==(const ParserLimits&) const = default;
};

class RequestParser {
 public:
  enum class Event : uint8_t {
    kNeedMore,  // every byte of the input is consumed; the request (if any) is unfinished
    kRequest,   // request() is complete; answer it, then next()
    kError,     // answer error_status() and close; the parser accepts nothing more
    kHead,      // streaming: request()'s head is complete, its body is to come
    kBody,      // streaming: body_piece() is the next piece of the body
  };

  /// Chunk extensions a request may carry in total; beyond: 400.
  static constexpr size_t kMaxChunkExtensionBytes = 4096;
  /// Chunked framing (sizes, extensions, CRLFs) may exceed this only while it stays below
  /// four times the data it frames (a flood of tiny chunks or endless leading zeros): 400.
  static constexpr uint64_t kFramingAllowanceBytes = 64 * 1024;

  explicit RequestParser(const ParserLimits& limits) noexcept;
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  /// Parses from the front of `input` and removes what it consumed. `input` must stay valid
  /// (and unchanged) until the request it completes has been answered, or detach_input().
  Event feed(std::string_view& input) noexcept;
  Request& request() noexcept { return request_; }
  /// Streaming mode (see above); set between requests.
  void set_streaming(bool on) noexcept { streaming_ = on; }
  /// After kHead: the body's framing as the head announced it.
  bool chunked() const noexcept { return (parser_.flags & F_CHUNKED) != 0; }
  uint64_t content_length() const noexcept {
    return (parser_.flags & F_CONTENT_LENGTH) != 0 ? parser_.content_length : 0;
  }
  /// After kBody: the piece, a view into the input given to feed().
  std::string_view body_piece() const noexcept { return body_piece_; }
  /// The peer the requests come from (Request::peer()).
  void set_peer(const InetAddress* peer) noexcept { request_.peer_ = peer; }
  /// After kError: the status to answer (400, 413, 414, 417, 431, 501, 505) and why.
  int error_status() const noexcept { return error_status_; }
  std::string_view error_reason() const noexcept { return error_reason_; }

  /// After the kRequest request was answered: forget it; bytes that follow belong to the
  /// next request.
  void next() noexcept;
  /// A request has begun (some of its bytes were consumed) and is not complete yet.
  bool in_message() const noexcept { return in_message_; }
  /// Between requests and not failed: after rewind() it can take a new connection's bytes.
  bool reusable() const noexcept { return !in_message_ && error_status_ == 0; }
  /// Back to the state of a new connection (llhttp remembers, e.g., a "Connection: close").
  void rewind() noexcept;
  const ParserLimits& limits() const noexcept { return limits_; }
  /// ...and its head is complete: the body is being read.
  bool in_body() const noexcept { return in_message_ && head_complete_; }
  /// The request asked for "100 Continue" and its body is still to come; say it once.
  bool wants_continue() const noexcept { return wants_continue_; }
  void continue_sent() noexcept { wants_continue_ = false; }
  /// The input given to feed() is about to be released: copy what the unfinished request
  /// still refers to. False when that memory cannot be had (close the connection then).
  bool detach_input() noexcept;
  /// Bytes held for an unfinished request (tail and body copies), for tests and limits.
  size_t held_bytes() const noexcept {
    const size_t body =
        body_copy_.capacity() > std::string().capacity() ? body_copy_.capacity() : 0;
    return tail_capacity_ + body;
  }

 private:
  enum class Token : uint8_t { kNone, kUrl, kField, kValue };
  static const llhttp_settings_t kSettings;
  static RequestParser& self(llhttp_t* parser) noexcept {
    return *static_cast<RequestParser*>(parser->data);
  }
  static int on_message_begin(llhttp_t* parser) noexcept;
  static int on_url(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_url_complete(llhttp_t* parser) noexcept;
  static int on_header_field(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_header_field_complete(llhttp_t* parser) noexcept;
  static int on_header_value(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_header_value_complete(llhttp_t* parser) noexcept;
  static int on_headers_complete(llhttp_t* parser) noexcept;
  static int on_body(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_chunk_complete(llhttp_t* parser) noexcept;
  static int on_message_complete(llhttp_t* parser) noexcept;

  void init_llhttp() noexcept;
  int fail(int status, const char* reason) noexcept;
  /// Reads the bytes between a field's name and its value (from `from` to the end of the
  /// input) for a fold after an empty value; false (and failed) when there is one.
  bool scan_for_fold(const char* from) noexcept;
  /// Reads the chunk-size line at the front of `input` and hands llhttp its size.
  bool read_chunk_line(std::string_view& input) noexcept;
  bool append(std::string_view& span, std::string_view piece, bool extend) noexcept;
  bool reserve_tail(size_t more) noexcept;
  void note_header(const Header& header) noexcept;
  int check_head() noexcept;
  bool check_framing() noexcept;
  void finish_request() noexcept;
  /// The views derived from the target and Host: path, query, host.
  void finish_target() noexcept;
  Header& current_field() noexcept {
    return request_.fields()[request_.header_count_ + request_.trailer_count_ - 1];
  }

  llhttp_t parser_;
  const ParserLimits limits_;
  Request request_;
  // The token llhttp is delivering, and in which feed() its last piece came: a second piece
  // of a header value within one feed() is an obs-fold continuation line.
  Token open_ = Token::kNone;
  bool open_reached_end_ = false;  // the open token's last piece ended its input
  uint32_t open_serial_ = 0;
  uint32_t serial_ = 0;
  const char* input_begin_ = nullptr;  // the input of the current feed()
  const char* input_end_ = nullptr;
  // Where the last pieces of the target and of a field name ended, and in which feed().
  const char* url_end_ = nullptr;
  uint32_t url_serial_ = 0;
  bool url_at_end_ = false;  // ...and it ended its input: the target may go on in the next
  const char* name_end_ = nullptr;
  uint32_t name_serial_ = 0;
  // llhttp skips whitespace, CRLF and more whitespace after a field's colon without a
  // callback, so a fold after an empty value reaches us as a plain value: the bytes between
  // the name and the value are read here (they may span feeds).
  enum class FoldScan : uint8_t { kOff, kColon, kWhitespace, kLineStart };
  FoldScan fold_scan_ = FoldScan::kOff;
  ChunkLine chunk_line_;
  bool chunk_line_next_ = false;  // llhttp paused where a chunk-size line begins
  bool last_chunk_ = false;       // the size-0 chunk was read: trailers follow
  // Sizes of the current request, against the limits.
  uint32_t line_bytes_ = 0;
  uint32_t header_bytes_ = 0;
  uint32_t trailer_bytes_ = 0;
  uint32_t extension_bytes_ = 0;  // of the chunk-size lines read so far
  uint64_t body_bytes_ = 0;
  uint64_t framing_bytes_ = 0;  // chunk-size lines and the CRLFs after chunk data
  // What the head said.
  uint8_t host_count_ = 0;
  uint8_t transfer_encoding_count_ = 0;
  bool transfer_encoding_chunked_ = false;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  bool expect_continue_ = false;
  bool expect_other_ = false;
  int host_index_ = -1;  // the Host field among request_'s fields
  // Where the request is.
  bool in_message_ = false;
  bool head_complete_ = false;
  bool wants_continue_ = false;
  bool tail_mode_ = false;  // the request's strings live in tail_, its body in body_copy_
  bool body_copied_ = false;
  std::string_view body_in_place_;  // the body while it is one piece of the input
  // Streaming.
  bool streaming_ = false;
  bool head_ready_ = false;  // feed() reports kHead next
  bool body_ready_ = false;  // feed() reports kBody next
  bool kick_ = false;        // llhttp paused: run it once more even without input
  std::string_view body_piece_;
  std::unique_ptr<char[]> tail_;
  size_t tail_size_ = 0;
  size_t tail_capacity_ = 0;
  std::string body_copy_;
  int error_status_ = 0;
  std::string_view error_reason_;
};

}  // namespace ucp::http::detail
