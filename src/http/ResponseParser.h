#pragma once
// ResponseParser: frames HTTP/1.1 responses out of a client connection's byte stream with
// llhttp in strict mode, head first and then the body piece by piece, so a body of any size
// passes through without being held. Chunk-size lines are read by ChunkLine, as the request
// parser does (llhttp 8.1 refuses valid chunk extensions).
//
//   parser.start(head_request);            // before each response
//   for (;;) {
//     auto event = parser.feed(input);      // consumes from `input`
//     kNeedMore: receive more (at EOF: parser.finish())
//     kHead: parser.head() is complete      kBody: parser.body_piece()
//     kEnd: the response is complete        kError: parser.error_reason()
//   }
//
// Beyond llhttp's strict checks it refuses what would make the framing ambiguous for a proxy
// passing the message on: Transfer-Encoding other than exactly one "chunked", a chunk line
// outside the grammar, a head or trailers above the limits; and it skips interim 1xx answers
// (a 101 ends HTTP: kHead with head().status == 101, and nothing more is parsed).
//
// The head's strings are copied into the parser (bounded by max_head_bytes); body pieces are
// views into the input.
//
// Thread contract: one thread at a time. Not movable (llhttp keeps a pointer to it).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <llhttp.h>

#include "ucp/http/ClientSession.h"

#include "ChunkLine.h"

namespace ucp::http::detail {

class ResponseParser {
 public:
  enum class Event : uint8_t {
    kNeedMore,  // every byte of the input consumed
    kHead,      // head() is complete
    kBody,      // body_piece() is the next piece of the body
    kEnd,       // the response is complete (trailers() hold its trailers)
    kError,     // error_reason() says why; the connection is unusable
  };

  /// Interim 1xx answers skipped before one response; more is an error.
  static constexpr uint32_t kMaxInterim = 16;

  explicit ResponseParser(const SessionLimits& limits) noexcept;
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  /// Expects the response to a new request (a HEAD's has no body whatever its head says).
  void start(bool head_request) noexcept;
  /// Parses from the front of `input` and removes what it consumed. After kBody the piece
  /// points into `input`, which must stay valid until it has been used.
  Event feed(std::string_view& input) noexcept;
  /// The connection ended: kEnd for a body delimited by the close, kError otherwise.
  Event finish() noexcept;

  const ResponseHead& head() const noexcept { return head_; }
  std::string_view body_piece() const noexcept { return body_piece_; }
  const std::vector<Header>& trailers() const noexcept { return trailers_; }
  const char* error_reason() const noexcept { return error_reason_; }
  bool head_complete() const noexcept { return head_complete_; }
  bool complete() const noexcept { return complete_; }
  /// The response was too large (as opposed to malformed).
  bool too_large() const noexcept { return too_large_; }

 private:
  struct Span {
    uint32_t offset = 0;  // in head_bytes_ (trailer_bytes_), or with kInInput, from base_
    uint32_t length = 0;
  };
  static constexpr uint32_t kInInput = 1U << 31;
  struct Field {
    Span name;
    Span value;
  };
  enum class Token : uint8_t { kNone, kStatus, kField, kValue };

  static const llhttp_settings_t kSettings;
  static ResponseParser& self(llhttp_t* parser) noexcept {
    return *static_cast<ResponseParser*>(parser->data);
  }
  static int on_message_begin(llhttp_t* parser) noexcept;
  static int on_status(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_header_field(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_header_field_complete(llhttp_t* parser) noexcept;
  static int on_header_value(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_header_value_complete(llhttp_t* parser) noexcept;
  static int on_headers_complete(llhttp_t* parser) noexcept;
  static int on_body(llhttp_t* parser, const char* at, size_t length) noexcept;
  static int on_chunk_complete(llhttp_t* parser) noexcept;
  static int on_message_complete(llhttp_t* parser) noexcept;

  int fail(const char* reason) noexcept;
  int fail_too_large(const char* reason) noexcept;
  /// Records a piece of the current token: a head's token as a view into the input (copied
  /// by keep_head_tokens() before the input goes), a trailer's copied into trailer_bytes_.
  bool append(Span& span, const char* at, size_t length, bool extend) noexcept;
  /// Copies the head's tokens that are still views into the input to head_bytes_: the whole
  /// stretch from the first to the last in one copy when `whole` (the head is complete; it is
  /// then at most one input long), else each token apart (the input ends mid-head: its bytes
  /// between tokens are not kept).
  bool keep_head_tokens(bool whole) noexcept;
  /// The bytes of a head's token, wherever they are.
  std::string_view head_token(Span span) const noexcept {
    return (span.offset & kInInput) != 0
               ? std::string_view(base_ + (span.offset & ~kInInput), span.length)
               : std::string_view(head_bytes_.data() + span.offset, span.length);
  }
  bool read_chunk_line(std::string_view& input) noexcept;
  /// Reads the bytes between a field's colon and its value (they may span inputs) for a fold
  /// after an empty value; false (and failed) when there is one.
  bool scan_for_fold(const char* from) noexcept;
  bool publish_head() noexcept;
  bool publish_trailers() noexcept;

  llhttp_t parser_;
  const SessionLimits limits_;
  ResponseHead head_;
  std::vector<Header> trailers_;
  std::string head_bytes_;     // the head's strings (views are made once it is complete)
  std::string trailer_bytes_;  // the trailers'
  std::vector<Field> fields_;  // of the head, then (trailers_) of the trailers
  std::vector<Field> trailer_fields_;
  Span status_text_;
  Token open_ = Token::kNone;
  // Which feed() delivered what, to tell a value continued across inputs from a fold.
  uint32_t serial_ = 0;
  const char* input_begin_ = nullptr;
  // The input of this feed() as it came: a head's tokens recorded as views lie in it. The head
  // is copied once, when it is complete, instead of token by token as llhttp reports them.
  const char* base_ = nullptr;
  bool in_input_ = false;        // some of the head's tokens are views into the input
  uint32_t first_in_input_ = 0;  // where the first of them begins (from base_)
  uint32_t end_in_input_ = 0;    // where the last of them ends
  const char* input_end_ = nullptr;
  const char* name_end_ = nullptr;
  uint32_t name_serial_ = 0;
  uint32_t value_serial_ = 0;
  bool value_at_end_ = false;
  enum class FoldScan : uint8_t { kOff, kColon, kWhitespace, kLineStart };
  FoldScan fold_scan_ = FoldScan::kOff;
  ChunkLine chunk_line_;
  bool chunk_line_next_ = false;
  bool last_chunk_ = false;
  bool head_request_ = false;
  bool head_complete_ = false;  // this response's (not an interim one's)
  bool head_pending_ = false;   // feed() reports kHead next
  bool body_pending_ = false;   // feed() reports kBody next
  bool complete_ = false;
  bool upgraded_ = false;  // a 101: no more HTTP
  bool too_large_ = false;
  bool failed_ = false;
  bool kick_ = false;  // llhttp paused: run it once more even without input
  uint8_t transfer_encoding_count_ = 0;
  bool transfer_encoding_chunked_ = false;
  uint32_t interim_ = 0;
  uint32_t head_size_ = 0;  // bytes of the head (or trailers) against max_head_bytes
  std::string_view body_piece_;
  const char* error_reason_ = "";
};

}  // namespace ucp::http::detail
