#pragma once
// Compression: a middleware that compresses response bodies with gzip or deflate (zlib), as
// the request's Accept-Encoding allows.
//
//   server.use(http::compression());                          // defaults below
//   server.use(http::compression({.min_bytes = 256, .level = 4}));
//
// A response is compressed when all of these hold: its body is in memory (set_body,
// body_buffer, the one-call answers; not a file body or a stream, which go out as they are);
// it is at least `min_bytes`; its status carries a body and is not 206 (a range is of the
// uncompressed bytes); it has no Content-Encoding yet and no "Cache-Control: no-transform";
// its Content-Type is text/*, JSON or XML (any "+json"/"+xml" type too), JavaScript, SVG,
// WebAssembly or another type in `extra_types` (images, video, archives and fonts are
// compressed already). Such a response gets "Vary: Accept-Encoding" whether or not this
// client accepts a coding, so that caches keep the variants apart.
//
// The coding: the one Accept-Encoding rates highest by its q-values (RFC 9110 §12.5.3),
// gzip before deflate on a tie, "*" standing for both; none with q>0: the body goes as it
// is (identity is always acceptable here: the server never answers 406). When compressing
// does not make the body smaller, it goes as it is too. A strong ETag becomes weak
// (W/"..."): the compressed bytes are another representation, and If-None-Match still
// matches it (weak comparison) while If-Range does not.
//
// "deflate" is the zlib format (RFC 1950 around RFC 1951), as RFC 9110 §8.4.1.2 defines it.
//
// Security: BREACH. Over TLS, a compressed response that holds both a secret (a CSRF token, a
// session id in the page) and text an attacker can make the page reflect (a query parameter
// echoed back) leaks the secret, one guessed byte at a time, through the response's length.
// Do not compress such responses: mark them "Cache-Control: no-transform" (the middleware
// then leaves them alone), or install compression only on a server whose responses carry no
// secrets next to reflected input; or mask the secret per response (XOR with a random pad
// sent along). Static assets and API responses without reflected input are safe.
//
// Cost: per compressed response, deflate over the body (zlib level `level`; level 1 is the
// fastest, 6 zlib's default) from one z_stream per thread and coding kept for reuse (about
// 256 KiB each); nothing per response that is not compressed but a look at its headers.
//
// Thread contract: the middleware runs on every worker thread at once.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/http/Middleware.h"

namespace ucp::http {

struct CompressionOptions {
  /// Bodies smaller than this go uncompressed (a few hundred bytes gain little and cost a
  /// deflate set-up).
  size_t min_bytes = 1024;
  /// zlib level: 1 (fastest) to 9 (smallest).
  int level = 6;
  bool gzip = true;
  bool deflate = true;
  /// Media types compressed besides the built-in ones ("application/x-ndjson").
  std::vector<std::string> extra_types{};
};

Middleware compression(CompressionOptions options = {});

enum class ContentCoding : uint8_t { kIdentity, kGzip, kDeflate };

/// The coding to answer with for `accept_encoding` (the header's value; "" when absent:
/// identity), among those enabled.
ContentCoding choose_coding(std::string_view accept_encoding, bool gzip = true,
                            bool deflate = true) noexcept;

/// Whether a body of `content_type` is worth compressing (the built-in list above).
bool compressible_type(std::string_view content_type) noexcept;

}  // namespace ucp::http
