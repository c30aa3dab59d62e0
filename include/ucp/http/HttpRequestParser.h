#pragma once
// HttpRequestParser: an incremental HTTP/1.x request framer. It finds where each request
// (head + Content-Length body) ends in a byte stream, and decides keep-alive, so a server
// can answer pipelined requests in order. It rejects the framing ambiguities that enable
// request smuggling (RFC 9112 §6.1/6.3) rather than guessing.
//
// Thread contract: none (plain value type).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ucp::http {

enum class ParseStatus : uint8_t {
  kIncomplete,      // need more bytes
  kComplete,        // one request framed: see Request
  kBadRequest,      // 400: malformed request line, header or Content-Length
  kHeaderTooLarge,  // 431: head larger than the limit
  kBodyTooLarge,    // 413: Content-Length above the body limit
  kNotImplemented,  // 501: Transfer-Encoding (chunked bodies are not supported yet)
};

struct Request {
  std::string_view method;
  std::string_view target;
  int minor_version = 1;  // HTTP/1.<minor>
  bool keep_alive = true;
  size_t content_length = 0;
  size_t total_bytes = 0;  // head + body: consume this many bytes
};

/// Frames the first request in `data`. `max_head_bytes` bounds the request line + headers,
/// `max_body_bytes` the Content-Length.
ParseStatus parse_request(std::string_view data, size_t max_head_bytes, size_t max_body_bytes,
                          Request& request);

}  // namespace ucp::http
