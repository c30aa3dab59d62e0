#pragma once
// Request paths as the file system sees them: percent-decoding and dot-segment removal.

#include <string>
#include <string_view>

namespace ucp::http {

/// Decodes every %XX escape once ("%2e" -> "."; "%252e" -> "%2e"). False for a malformed
/// escape or one that decodes to NUL.
bool percent_decode(std::string_view text, std::string& out);

/// Normalises an absolute path ("/a/./b/../c" -> "/a/c"): removes "." and ".." segments
/// (RFC 3986 §5.2.4) and empty ones ("//"), keeping a trailing '/'. False when the path
/// does not start with '/' or a ".." would climb above the root.
bool normalize_path(std::string_view path, std::string& out);

}  // namespace ucp::http
