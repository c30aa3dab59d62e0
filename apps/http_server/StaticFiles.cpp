#include "StaticFiles.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <utility>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ucp/http/HttpDate.h"
#include "ucp/http/Url.h"
#include "ucp/io/Timer.h"

namespace ucp::app {
namespace {

using http::Request;
using http::Response;

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

/// "<mtime>-<size>" in hex, quoted: changes whenever the file is replaced or rewritten
/// (nginx's form, so caches see the same validators across servers).
std::string entity_tag(const struct stat& st) {
  char text[64];
  const int n = std::snprintf(text, sizeof text, "\"%llx-%llx\"",
                              static_cast<unsigned long long>(st.st_mtim.tv_sec),
                              static_cast<unsigned long long>(st.st_size));
  return std::string(text, static_cast<size_t>(n));
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string_view opaque(std::string_view tag) {
  return tag.substr(0, 2) == "W/" ? tag.substr(2) : tag;
}

/// If-None-Match: "*" or a list of entity tags, compared weakly (RFC 9110 §13.1.2).
bool none_match_hits(std::string_view list, std::string_view tag) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (item == "*" || (!item.empty() && opaque(item) == opaque(tag))) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

/// If-Range: the range applies only if the validator still matches, strongly (§13.1.5).
bool if_range_holds(std::string_view value, std::string_view tag, std::time_t mtime) {
  value = trim(value);
  if (value.empty()) return true;
  if (value.front() == '"' || value.substr(0, 2) == "W/") return value == tag;
  std::time_t date = 0;
  return http::parse_http_date(value, date) && date == mtime;
}

bool parse_number(std::string_view text, uint64_t& value) {
  if (text.empty()) return false;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

enum class RangeKind { kIgnore, kUnsatisfiable, kSatisfiable };

/// One "bytes=first-last", "bytes=first-" or "bytes=-suffix" (RFC 9110 §14.1.2). Several
/// ranges, another unit or bad syntax: kIgnore (the whole file is sent).
RangeKind parse_range(std::string_view value, uint64_t size, uint64_t& first, uint64_t& last) {
  value = trim(value);
  if (value.size() < 6 || !http::iequals(value.substr(0, 6), "bytes=")) return RangeKind::kIgnore;
  const std::string_view spec = trim(value.substr(6));
  if (spec.find(',') != std::string_view::npos) return RangeKind::kIgnore;
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return RangeKind::kIgnore;
  const std::string_view from = spec.substr(0, dash);
  const std::string_view to = spec.substr(dash + 1);
  if (from.empty()) {  // the last `suffix` bytes
    uint64_t suffix = 0;
    if (!parse_number(to, suffix)) return RangeKind::kIgnore;
    if (suffix == 0 || size == 0) return RangeKind::kUnsatisfiable;
    first = suffix >= size ? 0 : size - suffix;
    last = size - 1;
    return RangeKind::kSatisfiable;
  }
  if (!parse_number(from, first)) return RangeKind::kIgnore;
  if (to.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parse_number(to, last) || last < first) {
    return RangeKind::kIgnore;
  }
  if (first >= size) return RangeKind::kUnsatisfiable;
  if (last >= size) last = size - 1;
  return RangeKind::kSatisfiable;
}

void serve_file(Request& request, Response& response, UniqueFd fd, const struct stat& st,
                std::string_view name) {
  const std::string tag = entity_tag(st);
  const std::time_t mtime = st.st_mtim.tv_sec;
  const auto size = static_cast<uint64_t>(st.st_size);
  response.add_header("Last-Modified", http::format_http_date(mtime));
  response.add_header("ETag", tag);
  response.add_header("Accept-Ranges", "bytes");

  const std::string_view none_match = request.header("if-none-match");
  std::time_t since = 0;
  const bool not_modified =
      !none_match.empty()
          ? none_match_hits(none_match, tag)
          : http::parse_http_date(trim(request.header("if-modified-since")), since) &&
                mtime <= since;
  if (not_modified) {
    response.set_status(304);
    return;
  }
  response.set_content_type(StaticFiles::content_type(name));

  const std::string_view range = request.header("range");
  if (!range.empty() && if_range_holds(request.header("if-range"), tag, mtime)) {
    uint64_t first = 0;
    uint64_t last = 0;
    switch (parse_range(range, size, first, last)) {
      case RangeKind::kUnsatisfiable:
        response.set_status(416);
        response.add_header("Content-Range", "bytes */" + std::to_string(size));
        return;
      case RangeKind::kSatisfiable:
        response.set_status(206);
        response.add_header("Content-Range", "bytes " + std::to_string(first) + "-" +
                                                 std::to_string(last) + "/" + std::to_string(size));
        response.set_file(std::move(fd), first, last - first + 1);
        return;
      case RangeKind::kIgnore:
        break;
    }
  }
  response.set_file(std::move(fd), 0, size);
}

/// Files served in the last second, per worker thread: a hit costs one dup() instead of
/// openat2 + fstat (a path walk and an inode lookup), the bulk of a small file's cost besides
/// the send. The cache keeps its own descriptor; each response gets a duplicate it closes
/// when sent, so an entry can be dropped at any time. A file replaced or changed on disk is
/// seen at most kValid later, as with nginx's open_file_cache.
class OpenFileCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr auto kValid = std::chrono::milliseconds(1000);

  /// A fresh entry for `path` (a normalized URL path) of `owner`, duplicated into `fd`.
  bool find(const StaticFiles* owner, const std::string& path, UniqueFd& fd, struct stat& st,
            std::string& name) {
    if (owner != owner_) return false;
    const auto it = entries_.find(path);
    if (it == entries_.end()) return false;
    if (Clock::now() - it->second.opened > kValid) {
      entries_.erase(it);
      return false;
    }
    fd = UniqueFd(::fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!fd) return false;
    st = it->second.st;
    name = it->second.name;
    return true;
  }
  void store(const StaticFiles* owner, const std::string& path, int fd, const struct stat& st,
             std::string_view name) {
    if (owner != owner_ || entries_.size() >= kMaxEntries) {
      entries_.clear();  // another server's, or full: start over (hits refill it)
      owner_ = owner;
    }
    UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!own) return;
    entries_.insert_or_assign(path, Entry{std::move(own), st, std::string(name), Clock::now()});
  }

 private:
  struct Entry {
    UniqueFd fd;
    struct stat st;
    std::string name;  // the file served (a directory's index), for its type
    Clock::time_point opened;
  };
  const StaticFiles* owner_ = nullptr;
  std::unordered_map<std::string, Entry> entries_;
};

OpenFileCache& open_file_cache() {
  thread_local OpenFileCache cache;
  return cache;
}

}  // namespace

StaticFiles::StaticFiles(const std::string& root, std::string index, std::string& error)
    : index_(std::move(index)) {
  root_ = UniqueFd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_) {
    error = "http.root '" + root + "': " + std::strerror(errno) +
            " (create the directory, or set http.root)";
  }
}

std::string_view StaticFiles::content_type(std::string_view name) noexcept {
  const size_t dot = name.rfind('.');
  const size_t slash = name.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return "application/octet-stream";
  }
  const std::string_view extension = name.substr(dot + 1);
  for (const MimeType& mime : kMimeTypes) {
    if (http::iequals(mime.extension, extension)) return mime.type;
  }
  return "application/octet-stream";
}

UniqueFd StaticFiles::open_beneath(const std::string& relative, int flags) const {
  // RESOLVE_BENEATH: every component, symlinks included, must stay under the root; ".."
  // and absolute symlinks that would leave it fail with EXDEV. Linux 5.6+.
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return UniqueFd(
      static_cast<int>(::syscall(SYS_openat2, root_.get(), relative.c_str(), &how, sizeof how)));
}

Task<> StaticFiles::handle(http::Request& request, http::Response& response) const {
  answer(request, response);
  co_return;
}

void StaticFiles::answer(Request& request, Response& response) const {
  if (!root_) {
    answer_status(response, 404, "Not Found\n");
    return;
  }
  std::string decoded;
  if (!http::percent_decode(request.path(), decoded)) {
    answer_status(response, 400, "Bad Request\n");
    return;
  }
  std::string path;
  if (!http::normalize_path(decoded, path)) {
    answer_status(response, 403, "Forbidden\n");  // ".." above the root
    return;
  }
  OpenFileCache& cache = open_file_cache();
  {
    UniqueFd cached;
    struct stat st {};
    std::string name;
    if (cache.find(this, path, cached, st, name)) {
      serve_file(request, response, std::move(cached), st, name);
      return;
    }
  }
  std::string relative = path == "/" ? std::string(".") : path.substr(1);
  UniqueFd fd = open_beneath(relative, O_RDONLY | O_NONBLOCK);
  if (!fd) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR || error == ENAMETOOLONG) {
      answer_status(response, 404, "Not Found\n");
    } else {
      answer_status(response, 403, "Forbidden\n");  // EXDEV (escape), ELOOP, EACCES...
    }
    return;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    answer_status(response, 403, "Forbidden\n");
    return;
  }
  std::string_view name = path;
  std::string index_path;
  if (S_ISDIR(st.st_mode)) {
    if (path.back() != '/') {
      std::string location = std::string(request.path()) + "/";
      if (!request.query().empty()) location.append("?").append(request.query());
      response.set_status(301);
      response.add_header("Location", location);
      response.set_content_type("text/plain");
      response.set_body("Moved Permanently\n");
      return;
    }
    index_path = (relative == "." ? std::string() : relative) + index_;
    fd = open_beneath(index_path, O_RDONLY | O_NONBLOCK);
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      answer_status(response, 404, "Not Found\n");
      return;
    }
    name = index_path;
  } else if (!S_ISREG(st.st_mode)) {
    answer_status(response, 403, "Forbidden\n");  // devices, FIFOs, sockets
    return;
  }
  cache.store(this, path, fd.get(), st, name);
  serve_file(request, response, std::move(fd), st, name);
}

}  // namespace ucp::app
