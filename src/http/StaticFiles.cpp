#include "ucp/http/StaticFiles.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ucp/base/UniqueFd.h"
#include "ucp/http/HttpDate.h"
#include "ucp/http/Preconditions.h"
#include "ucp/http/Request.h"
#include "ucp/http/Response.h"
#include "ucp/http/Url.h"
#include "ucp/log/Logger.h"

#include "ConditionalFields.h"
#include "FileCache.h"

namespace ucp::http {

/// What the routes of a StaticFiles share: the open root, the options, a number of its own for
/// the per-thread caches.
struct detail::StaticRoot {
  UniqueFd root;
  StaticFilesOptions options;
  uint64_t id = 0;

  UniqueFd open_beneath(const std::string& relative, int flags) const {
    // RESOLVE_BENEATH: every component, symlinks included, must stay under the root; ".."
    // and absolute symlinks that would leave it fail with EXDEV. Linux 5.6+.
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    return UniqueFd(
        static_cast<int>(::syscall(SYS_openat2, root.get(), relative.c_str(), &how, sizeof how)));
  }
  void answer(const Request& request, Response& response) const;
};

namespace {

using detail::FileCache;
using detail::FileInfo;
using detail::same_file;

struct MimeType {
  std::string_view extension;
  std::string_view type;
};

constexpr MimeType kMimeTypes[] = {
    {"html", "text/html"},       {"htm", "text/html"},         {"css", "text/css"},
    {"js", "text/javascript"},   {"mjs", "text/javascript"},   {"json", "application/json"},
    {"map", "application/json"}, {"txt", "text/plain"},        {"md", "text/markdown"},
    {"csv", "text/csv"},         {"xml", "application/xml"},   {"svg", "image/svg+xml"},
    {"png", "image/png"},        {"jpg", "image/jpeg"},        {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},        {"webp", "image/webp"},       {"avif", "image/avif"},
    {"ico", "image/x-icon"},     {"wasm", "application/wasm"}, {"pdf", "application/pdf"},
    {"zip", "application/zip"},  {"gz", "application/gzip"},   {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},        {"webm", "video/webm"},       {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},        {"woff", "font/woff"},        {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},         {"otf", "font/otf"},
};

void answer_status(Response& response, int status, std::string_view text) {
  response.set_status(status);
  response.set_content_type("text/plain");
  response.set_body(text);
}

/// A file that could not be opened or examined. The client's doing (a missing file, a path
/// or a file it may not have) is 404 or 403; anything else is the server's: 503 when it ran
/// out of descriptors or memory (it passes), 500 otherwise, and logged (once a second per
/// worker at most, with a count) so that 5xx alerting and the log both see it.
void answer_failure(Response& response, int error, std::string_view path) {
  switch (error) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
      answer_status(response, 404, "Not Found\n");
      return;
    case EACCES:
    case EPERM:
    case ELOOP:   // a symlink loop, or a magic link (RESOLVE_NO_MAGICLINKS)
    case EXDEV:   // a path or symlink out of the root (RESOLVE_BENEATH)
    case ENXIO:   // a socket
    case ENODEV:  // a device without a driver
      answer_status(response, 403, "Forbidden\n");
      return;
    default:
      break;
  }
  const bool exhausted = error == EMFILE || error == ENFILE || error == ENOMEM;
  if (exhausted) {
    answer_status(response, 503, "Service Unavailable\n");
  } else {
    answer_status(response, 500, "Internal Server Error\n");
  }
  thread_local std::chrono::steady_clock::time_point last_warning{};
  thread_local uint64_t unreported = 0;
  ++unreported;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_warning < std::chrono::seconds(1)) return;
  last_warning = now;
  LOG_WARN("static files: {} on {}: {}{} ({} such failures since the last line)",
           exhausted ? "out of descriptors or memory" : "cannot open or examine a file",
           std::string(path), std::strerror(error),
           error == EMFILE || error == ENFILE ? " (raise the descriptor limit: ulimit -n)" : "",
           unreported);
  unreported = 0;
}

void fill_validators(FileInfo& info) {
  info.type = StaticFiles::content_type(info.name);
  info.tag = file_entity_tag(info.st.st_mtim.tv_sec, static_cast<uint64_t>(info.st.st_size));
  info.last_modified = format_http_date(info.st.st_mtim.tv_sec);
}

/// The answer for a file: validators, then 304/412/416, or its bytes (the cached ones copied,
/// or the open file) whole or as the range asked for.
void serve_file(const Request& request, Response& response, UniqueFd fd, const FileInfo& info) {
  const auto size = static_cast<uint64_t>(info.st.st_size);
  // The validators formatted once per cache entry, not per request.
  response.add_header("Last-Modified", info.last_modified);
  response.add_header("ETag", info.tag);
  response.add_header("Accept-Ranges", "bytes");
  const Validators validators{.etag = info.tag, .last_modified = info.st.st_mtim.tv_sec};
  const detail::ConditionalFields fields(request);
  if (const int status = detail::preconditions_status(fields, validators); status != 0) {
    response.set_status(status);
    return;
  }
  response.add_header("Content-Type", info.type);
  ByteRange range{0, size};
  switch (detail::range_decision(fields, validators, size, range)) {
    case RangeDecision::kUnsatisfiable:
      response.set_status(416);
      response.add_header("Content-Range", "bytes */" + std::to_string(size));
      return;
    case RangeDecision::kPartial:
      response.set_status(206);
      response.add_header("Content-Range", "bytes " + std::to_string(range.offset) + "-" +
                                               std::to_string(range.offset + range.length - 1) +
                                               "/" + std::to_string(size));
      break;
    case RangeDecision::kWhole:
      range = {0, size};
      break;
  }
  if (info.has_content) {
    response.body_buffer().assign(info.content, range.offset, range.length);
  } else {
    response.set_file(std::move(fd), range.offset, range.length);
  }
}

/// The 301 for a directory path without its slash: to the normalized path, encoded, behind
/// the mount's prefix (decoded and encoded again: it came from the request too), query kept.
void redirect_to_directory(const Request& request, Response& response, std::string_view prefix,
                           std::string_view path) {
  std::string decoded_prefix;
  if (!percent_decode(prefix, decoded_prefix)) {
    answer_status(response, 400, "Bad Request\n");
    return;
  }
  std::string location;
  append_encoded_path(location, decoded_prefix);
  if (!location.empty() && location.back() == '/') location.pop_back();
  append_encoded_path(location, path);
  location += '/';
  if (!request.query().empty()) {
    location += '?';
    append_encoded_query(location, request.query());
  }
  response.set_status(301);
  response.add_header("Location", location);
  response.set_content_type("text/plain");
  response.set_body("Moved Permanently\n");
}

Task<> serve_task(const detail::StaticRoot& root, Request& request, Response& response) {
  root.answer(request, response);  // no coroutine work: the server sends the file
  co_return;
}

std::atomic<uint64_t> next_root_id{1};

}  // namespace

void detail::StaticRoot::answer(const Request& request, Response& response) const {
  // The path under the mount: what a trailing `*` took, else the whole path.
  std::string_view encoded = request.path();
  std::string_view prefix;
  if (const auto star = request.find_param("*")) {
    const std::string_view rest = *star;
    prefix = encoded.substr(0, encoded.size() - rest.size());
    encoded = prefix.empty() || prefix.back() != '/' ? rest : encoded.substr(prefix.size() - 1);
    prefix.remove_suffix(prefix.empty() ? 0 : 1);
  }
  std::string decoded;
  if (!percent_decode(encoded, decoded)) {
    answer_status(response, 400, "Bad Request\n");
    return;
  }
  std::string path;
  if (!normalize_path(decoded, path)) {
    answer_status(response, 403, "Forbidden\n");  // ".." above the root
    return;
  }
  FileCache& cache = detail::file_cache(id);
  const FileInfo* cached = cache.find(path);
  if (cached != nullptr && cached->has_content) {
    struct stat now {};
    if (::fstatat(root.get(), cached->opened.c_str(), &now, 0) == 0 && same_file(now, cached->st)) {
      serve_file(request, response, UniqueFd(), *cached);
      return;
    }
    cached = nullptr;  // changed or gone: opened anew below, and the entry replaced
  }
  std::string relative = path == "/" ? std::string(".") : path.substr(1);
  UniqueFd fd = open_beneath(relative, O_RDONLY | O_NONBLOCK);
  if (!fd) {
    answer_failure(response, errno, path);
    return;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    answer_failure(response, errno, path);
    return;
  }
  std::string_view name = path;
  std::string index_path;
  if (S_ISDIR(st.st_mode)) {
    if (path.back() != '/') {
      redirect_to_directory(request, response, prefix, path);
      return;
    }
    if (options.index.empty()) {
      answer_status(response, 404, "Not Found\n");
      return;
    }
    index_path = (relative == "." ? std::string() : relative) + options.index;
    fd = open_beneath(index_path, O_RDONLY | O_NONBLOCK);
    if (!fd || ::fstat(fd.get(), &st) != 0) {
      answer_failure(response, errno, path);  // no index: 404
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      answer_status(response, 404, "Not Found\n");
      return;
    }
    name = index_path;
    relative = index_path;
  } else if (!S_ISREG(st.st_mode)) {
    answer_status(response, 403, "Forbidden\n");  // devices, FIFOs, sockets
    return;
  }
  if (cached != nullptr && same_file(st, cached->st) && cached->opened == relative) {
    serve_file(request, response, std::move(fd), *cached);  // validators formatted already
    return;
  }
  FileInfo info;
  info.st = st;
  info.name = name;
  info.opened = relative;
  fill_validators(info);
  if (const FileInfo* kept = cache.store(path, fd.get(), info)) {
    if (kept->has_content) fd.reset();
    serve_file(request, response, std::move(fd), *kept);
    return;
  }
  serve_file(request, response, std::move(fd), info);
}

Result<StaticFiles, Error> StaticFiles::open(const std::string& root, StaticFilesOptions options) {
  auto state = std::make_shared<detail::StaticRoot>();
  state->root = UniqueFd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!state->root) {
    const int error = errno;
    return Unexpected{Error("static files root '" + root + "': " + std::strerror(error),
                            std::error_code(error, std::system_category()))};
  }
  state->options = std::move(options);
  state->id = next_root_id.fetch_add(1, std::memory_order_relaxed);
  return StaticFiles(std::move(state));
}

Handler StaticFiles::handler() const {
  return [root = root_](Request& request, Response& response) {
    return serve_task(*root, request, response);
  };
}

void StaticFiles::mount(Router& router, std::string_view prefix) const {
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  const std::string base(prefix);
  router.get(base + "/*", handler());
  if (base.empty()) return;
  router.get(base, [base](Request& request, Response& response) -> Task<> {
    std::string location = base + '/';  // the route's own bytes, not the request's
    if (!request.query().empty()) {
      location += '?';
      append_encoded_query(location, request.query());
    }
    response.set_status(301);
    response.add_header("Location", location);
    response.set_content_type("text/plain");
    response.set_body("Moved Permanently\n");
    co_return;
  });
}

std::string_view StaticFiles::content_type(std::string_view name) noexcept {
  const size_t dot = name.rfind('.');
  const size_t slash = name.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return "application/octet-stream";
  }
  const std::string_view extension = name.substr(dot + 1);
  for (const MimeType& mime : kMimeTypes) {
    if (iequals(mime.extension, extension)) return mime.type;
  }
  return "application/octet-stream";
}

void send_file(const Request& request, Response& response, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    answer_failure(response, errno, path);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    answer_status(response, S_ISDIR(st.st_mode) ? 404 : 403,
                  S_ISDIR(st.st_mode) ? "Not Found\n" : "Forbidden\n");
    return;
  }
  FileInfo info;
  info.st = st;
  info.name = path;
  fill_validators(info);
  serve_file(request, response, std::move(fd), info);
}

}  // namespace ucp::http
