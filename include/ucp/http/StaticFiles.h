#pragma once
// StaticFiles: the files under a directory, served on a path of the router (GET and HEAD),
// the way bin/http_server serves http.root.
//
//   auto files = http::StaticFiles::open("/srv/www");      // Result<StaticFiles, Error>
//   if (!files) { /* files.error().message: the root cannot be opened, and why */ }
//   files->mount(server.router(), "/static");  // /static/css/site.css -> /srv/www/css/site.css
//   files->mount(server.router(), "/");        // or every path the other routes leave
//
//   // One file, chosen by the handler (a path on the file system):
//   router.get("/report", [](Request& req, Response& res) -> Task<> {
//     co_return http::send_file(req, res, "/var/lib/app/report.pdf");
//   });
//
// What a request gets:
// - The path under the mount is percent-decoded once (%252e stays %2e) and its dot and empty
//   segments removed; one that would climb above the root is 403. Files are opened relative
//   to the root with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so no symlink leads out
//   of it either (absolute, or through ".."): 403. Symlinks inside the root are followed.
//   Devices, FIFOs and sockets: 403. Missing: 404.
// - A directory serves its index file (StaticFilesOptions::index; 404 without one); a
//   directory path without its trailing slash is redirected (301) to the normalized path with
//   it, query kept, both percent-encoded: a Location is never made of the request's bytes
//   (the raw "//evil.example/.." would send a browser to another host).
// - Content-Type by extension (application/octet-stream when unknown), Last-Modified, a strong
//   ETag (mtime and size), Accept-Ranges; conditional requests and one byte range as
//   Preconditions.h says: 304, 412, 206, 416. Several ranges: the whole file.
// - A file that cannot be opened: 404 or 403 when the request is at fault; 503 when the
//   process is out of descriptors or memory, 500 otherwise (both logged, once a second per
//   worker at most, with a count).
// - Small files (up to 16 KiB) served in the last second are kept per worker thread with their
//   bytes, larger ones with their validators; no descriptor is kept. A hit is checked with one
//   fstatat() first: a change on disk is seen by the next request. Larger files are sent by the
//   server from the page cache (docs/http.md, "Files").
//
// Thread contract: open and mount on one thread before the server starts; the handlers run on
// every worker thread at once. A StaticFiles is a cheap handle (copies share the root); the
// routes keep what they need, so it may go out of scope after mount().

#include <memory>
#include <string>
#include <string_view>

#include "ucp/base/Result.h"
#include "ucp/http/Router.h"

namespace ucp::http {

class Request;
class Response;

namespace detail {
struct StaticRoot;
}

struct StaticFilesOptions {
  /// What a directory serves; "" = nothing (404).
  std::string index = "index.html";
};

class StaticFiles {
 public:
  /// Opens `root` (a directory). Error: it cannot be opened, and why.
  static Result<StaticFiles, Error> open(const std::string& root, StaticFilesOptions options = {});

  /// Serves the files on `prefix` ("/static", or "/" for every path; literal segments only):
  /// GET and HEAD of prefix + "/*", and `prefix` itself redirected to prefix + "/". Throws as
  /// Router::add does (a malformed prefix, a route that exists already).
  void mount(Router& router, std::string_view prefix) const;
  /// The handler that mount() installs, for a route of your own: it serves param("*") when
  /// the route has a trailing `*`, else the request's whole path.
  Handler handler() const;

  /// The Content-Type for a file name, by its extension.
  static std::string_view content_type(std::string_view name) noexcept;

 private:
  explicit StaticFiles(std::shared_ptr<const detail::StaticRoot> root) noexcept
      : root_(std::move(root)) {}
  std::shared_ptr<const detail::StaticRoot> root_;
};

/// One-call answer with the file at `path` (on the file system, opened as given): its
/// Content-Type, validators, conditional requests and a range, as StaticFiles does. 404 when
/// it is missing or not a regular file, 403 when it may not be read, 503/500 as above.
void send_file(const Request& request, Response& response, const std::string& path);

}  // namespace ucp::http
