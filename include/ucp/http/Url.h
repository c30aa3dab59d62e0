#pragma once
// Request paths as the file system sees them (percent-decoding, dot-segment removal), and back
// into a URL (percent-encoding) for what the server writes, such as a Location.

#include <string>
#include <string_view>

namespace ucp::http {

/// Decodes every %XX escape once ("%2e" -> "."; "%252e" -> "%2e"). False for a malformed
/// escape or one that decodes to NUL.
bool percent_decode(std::string_view text, std::string& out);

/// Appends one application/x-www-form-urlencoded component (a query's name or value) to
/// `out`, decoded as browsers encode it: '+' is a space, a valid %XX escape is its byte (NUL
/// included), anything else (a malformed escape too) stays as it is. Never fails.
void form_decode(std::string_view text, std::string& out);

/// Normalises an absolute path ("/a/./b/../c" -> "/a/c"): removes "." and ".." segments
/// (RFC 3986 §5.2.4) and empty ones ("//"), keeping a trailing '/'. False when the path
/// does not start with '/' or a ".." would climb above the root.
bool normalize_path(std::string_view path, std::string& out);

/// Appends `path` (decoded bytes) to `out` as a URL path: every byte but the unreserved
/// characters, sub-delims, ':', '@' and '/' becomes %XX (RFC 3986 §3.3). So no byte of a
/// request can turn into something else in a header: '\' (which browsers read as '/'), '%',
/// '?', '#', spaces, controls and 8-bit bytes are all encoded.
void append_encoded_path(std::string& out, std::string_view path);

/// Appends a raw (still encoded) query to `out`: its valid %XX escapes and query characters
/// (RFC 3986 §3.4) as they are, every other byte (and a '%' that starts no escape) as %XX.
void append_encoded_query(std::string& out, std::string_view query);

}  // namespace ucp::http
