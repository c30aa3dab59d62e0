// llhttp's two builds on x86-64 (src/http/LlhttpSse42.c): the SSE4.2 copy, which the parsers
// use on a CPU that has it, and the plain one must read every input the same way: the same
// callbacks with the same bytes, the same error at the same byte. Requests and responses with
// names and values long enough for the 16-byte scans, a forbidden byte at every offset of them,
// each fed whole and split at every byte.

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <llhttp.h>

extern "C" {
int llhttp__internal_execute(llhttp__internal_t* s, const char* p, const char* endp);
int llhttp__internal_execute_sse42(llhttp__internal_t* s, const char* p, const char* endp);
}

namespace {

using Execute = int (*)(llhttp__internal_t*, const char*, const char*);

std::string& log_of(llhttp_t* parser) { return *static_cast<std::string*>(parser->data); }

template <char Tag>
int on_span(llhttp_t* parser, const char* at, size_t length) {
  log_of(parser).append(1, Tag).append(at, length).append(1, '|');
  return 0;
}

template <char Tag>
int on_event(llhttp_t* parser) {
  log_of(parser).append(1, Tag).append(1, '|');
  return 0;
}

const llhttp_settings_t& settings() {
  static const llhttp_settings_t s = [] {
    llhttp_settings_t r;
    llhttp_settings_init(&r);
    r.on_message_begin = &on_event<'B'>;
    r.on_url = &on_span<'U'>;
    r.on_status = &on_span<'S'>;
    r.on_header_field = &on_span<'F'>;
    r.on_header_field_complete = &on_event<'f'>;
    r.on_header_value = &on_span<'V'>;
    r.on_header_value_complete = &on_event<'v'>;
    r.on_headers_complete = &on_event<'H'>;
    r.on_body = &on_span<'D'>;
    r.on_message_complete = &on_event<'E'>;
    return r;
  }();
  return s;
}

/// What `execute` makes of `input` fed in two pieces (split at `split`): the callbacks, then the
/// error and the offset where it stopped.
std::string run(Execute execute, llhttp_type_t type, std::string_view input, size_t split) {
  std::string log;
  llhttp_t parser;
  llhttp_init(&parser, type, &settings());
  parser.data = &log;
  const std::string_view pieces[2] = {input.substr(0, split), input.substr(split)};
  for (std::string_view piece : pieces) {
    const int error = execute(&parser, piece.data(), piece.data() + piece.size());
    if (error != HPE_OK) {
      log.append("error ").append(llhttp_errno_name(static_cast<llhttp_errno_t>(error)));
      log.append(" at ").append(std::to_string(llhttp_get_error_pos(&parser) - input.data()));
      break;
    }
  }
  return log;
}

void expect_same(llhttp_type_t type, const std::string& input) {
  for (size_t split = 0; split <= input.size(); ++split) {
    const std::string plain = run(&llhttp__internal_execute, type, input, split);
    const std::string sse42 = run(&llhttp__internal_execute_sse42, type, input, split);
    ASSERT_EQ(plain, sse42) << "split at " << split << " of:\n" << input;
  }
}

TEST(LlhttpSse42, ReadsValidMessagesAsThePlainParserDoes) {
  if (!__builtin_cpu_supports("sse4.2")) GTEST_SKIP() << "no SSE4.2 on this CPU";
  const std::string long_value = "text/html; charset=utf-8; q=0.9, application/xhtml+xml";
  expect_same(HTTP_REQUEST,
              "GET /a/rather/long/path/to/scan?with=a&query=string HTTP/1.1\r\n"
              "Host: backend.example.com:8080\r\n"
              "Accept: " +
                  long_value +
                  "\r\n"
                  "X-A-Rather-Long-Field-Name-To-Scan: v\r\n"
                  "Content-Length: 5\r\n\r\nhello");
  expect_same(HTTP_RESPONSE,
              "HTTP/1.1 200 OK\r\nServer: ucp\r\nDate: Sun, 29 Nov 2026 22:10:02 GMT\r\n"
              "Content-Type: " +
                  long_value +
                  "\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "5\r\nhello\r\n0\r\nX-Trailer-With-A-Long-Name: and a long value too\r\n\r\n");
}

TEST(LlhttpSse42, StopsAtTheSameForbiddenByteOfANameOrAValue) {
  if (!__builtin_cpu_supports("sse4.2")) GTEST_SKIP() << "no SSE4.2 on this CPU";
  const std::string name = "X-A-Field-Name-Longer-Than-Sixteen-Bytes";
  const std::string value = "a value longer than sixteen bytes, and then some more";
  for (char bad : {'\0', '\x01', '\x7f', '\t', '\r', '\n', '\xff', ' ', ':', '"'}) {
    for (size_t at = 0; at < name.size(); ++at) {
      std::string broken = name;
      broken[at] = bad;
      expect_same(HTTP_REQUEST, "GET / HTTP/1.1\r\n" + broken + ": v\r\n\r\n");
      expect_same(HTTP_RESPONSE, "HTTP/1.1 200 OK\r\n" + broken + ": v\r\n\r\n");
    }
    for (size_t at = 0; at < value.size(); ++at) {
      std::string broken = value;
      broken[at] = bad;
      expect_same(HTTP_REQUEST, "GET / HTTP/1.1\r\nX: " + broken + "\r\n\r\n");
      expect_same(HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX: " + broken + "\r\n\r\n");
    }
  }
}

}  // namespace
