#pragma once
// StaticFiles: GET and HEAD of the files under a root directory, for bin/http_server.
//
// - The path is percent-decoded once and its dot segments removed; a path that would leave
//   the root is 403. Files are opened relative to the root with openat2(RESOLVE_BENEATH),
//   so no symlink (absolute, or "..") leads out of it either: 403.
// - A directory serves its index file (404 without one); a directory path without its
//   trailing slash is redirected (301) to the normalized path with it, percent-encoded: a
//   Location is never made of the request's bytes.
// - Content-Type by extension (unknown: application/octet-stream), Last-Modified, ETag,
//   Accept-Ranges. If-None-Match matching the ETag, or (without If-None-Match)
//   If-Modified-Since not older than the file: 304. One byte range (Range, honouring
//   If-Range): 206, or 416 with "Content-Range: bytes */SIZE"; several ranges are answered
//   with the whole file (200), which RFC 9110 allows.
// - A file that cannot be opened: 404 or 403 when the request is at fault, 503 when the
//   process is out of descriptors or memory, 500 otherwise (those two logged).
// - Files served in the last second are kept per worker thread, without a descriptor: one
//   up to 16 KiB with its bytes (a hit is one fstatat() and a copy into the response), a
//   larger one with its validators. Every hit checks the file first: a change on disk is
//   seen by the next request, and a small file's bytes and validators are one snapshot.
//
// Thread contract: built once on the main thread; handle() runs on any worker thread.

#include <string>
#include <string_view>

#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/http/Request.h"
#include "ucp/http/Response.h"

namespace ucp::app {

class StaticFiles {
 public:
  /// Opens `root`. On failure, `error` says why (and the object serves nothing).
  StaticFiles(const std::string& root, std::string index, std::string& error);

  /// The route handler for "/*".
  Task<> handle(http::Request& request, http::Response& response) const;

  /// The Content-Type for a file name, by its extension.
  static std::string_view content_type(std::string_view name) noexcept;

 private:
  /// Answers directly (no coroutine work is needed: the file body is sent by the server).
  void answer(http::Request& request, http::Response& response) const;
  UniqueFd open_beneath(const std::string& relative, int flags) const;

  UniqueFd root_;
  std::string index_;
};

}  // namespace ucp::app
