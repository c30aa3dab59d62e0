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
#include "ucp/log/Logger.h"

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

/// The same file, unchanged since `a` was taken: same inode, size, modification and change
/// times (a chmod or a rename over it changes the change time).
bool same_file(const struct stat& a, const struct stat& b) noexcept {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
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
    if (suffix == 0) return RangeKind::kUnsatisfiable;
    if (size == 0) return RangeKind::kIgnore;  // satisfiable, but no byte to name: the whole
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

/// What a cached or freshly opened file answers with: its validators and, for a small file,
/// its bytes (read once), else the open file (sent through the ring).
struct FileInfo {
  struct stat st {};
  std::string name;           // the file served (a directory's index), for its type
  std::string opened;         // its path relative to the root, as opened
  std::string tag;            // ETag
  std::string last_modified;  // Last-Modified
  std::string content;        // a small file's bytes (valid when has_content)
  bool has_content = false;
};

void fill_validators(FileInfo& info) {
  info.tag = entity_tag(info.st);
  info.last_modified = http::format_http_date(info.st.st_mtim.tv_sec);
}

/// The body: `length` bytes from `offset`, copied from the cached bytes, or the file itself.
void set_body(Response& response, const FileInfo& info, UniqueFd fd, uint64_t offset,
              uint64_t length) {
  if (info.has_content) {
    response.body_buffer().assign(info.content, offset, length);
  } else {
    response.set_file(std::move(fd), offset, length);
  }
}

void serve_file(Request& request, Response& response, UniqueFd fd, const FileInfo& info) {
  const std::time_t mtime = info.st.st_mtim.tv_sec;
  const auto size = static_cast<uint64_t>(info.st.st_size);
  response.add_header("Last-Modified", info.last_modified);
  response.add_header("ETag", info.tag);
  response.add_header("Accept-Ranges", "bytes");

  const std::string_view none_match = request.header("if-none-match");
  std::time_t since = 0;
  const bool not_modified =
      !none_match.empty()
          ? none_match_hits(none_match, info.tag)
          : http::parse_http_date(trim(request.header("if-modified-since")), since) &&
                mtime <= since;
  if (not_modified) {
    response.set_status(304);
    return;
  }
  response.set_content_type(StaticFiles::content_type(info.name));

  const std::string_view range = request.header("range");
  if (!range.empty() && if_range_holds(request.header("if-range"), info.tag, mtime)) {
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
        set_body(response, info, std::move(fd), first, last - first + 1);
        return;
      case RangeKind::kIgnore:
        break;
    }
  }
  set_body(response, info, std::move(fd), 0, size);
}

/// Files served in the last second, per worker thread. It holds no descriptor: a descriptor
/// kept for later would pin a deleted file's disk space and count against the process's
/// limit while the server is idle (a crawl of many large files once left a worker thread with
/// 256 of them). What it keeps is a file's validators (its stat, ETag and Last-Modified
/// formatted once) and, for a file up to kContentBytes, its bytes (at most kMaxEntries
/// entries, so at most 4 MiB per thread), copied into the response on a hit.
///
/// A hit is checked against the file system first, so a change is seen by the next request:
/// a small file's entry by one fstatat() of its path (instead of openat2 + fstat + read), a
/// larger file's against the fstat of the descriptor the request opens anyway. A file's
/// change time moves with every write, chmod or rename over it; on file systems with coarse
/// timestamps two writes within one clock tick that keep the size could look alike (Linux
/// 6.13+ gives a file whose times were just read fine-grained ones for its next change).
/// Entries are dropped after kValid, at the latest when the cache is next used.
class FileCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kContentBytes = 16 * 1024;
  static constexpr auto kValid = std::chrono::milliseconds(1000);

  /// The entry for `path` (a normalized URL path) of `owner`, if it is fresh; the caller
  /// still checks that the file is unchanged.
  const FileInfo* find(const StaticFiles* owner, const std::string& path) {
    if (owner != owner_) return nullptr;
    const auto now = Clock::now();
    expire(now);
    const auto it = entries_.find(path);
    if (it == entries_.end()) return nullptr;
    if (now - it->second.filled > kValid) {
      entries_.erase(it);
      return nullptr;
    }
    return &it->second.info;
  }

  /// Keeps `info` for `path`: with the bytes of a small regular file (read here, from the
  /// open `fd`, and kept only if the file did not change meanwhile). Returns the entry, or
  /// nullptr when it could not be kept (the caller then serves `fd` itself).
  const FileInfo* store(const StaticFiles* owner, const std::string& path, int fd, FileInfo info) {
    if (owner != owner_ || entries_.size() >= kMaxEntries) {
      entries_.clear();  // another server's, or full: start over (hits refill it)
      owner_ = owner;
    }
    Entry entry{std::move(info), Clock::now()};
    const auto size = static_cast<size_t>(entry.info.st.st_size);
    if (size <= kContentBytes) {
      struct stat after {};
      if (!read_whole(fd, size, entry.info.content) || ::fstat(fd, &after) != 0 ||
          !same_file(after, entry.info.st)) {
        return nullptr;  // changing while read: served from its descriptor this time
      }
      entry.info.has_content = true;
    }
    return &entries_.insert_or_assign(path, std::move(entry)).first->second.info;
  }

 private:
  struct Entry {
    FileInfo info;
    Clock::time_point filled;
  };

  /// Drops every entry older than kValid, at most once per kValid.
  void expire(Clock::time_point now) {
    if (now - last_expiry_ < kValid) return;
    last_expiry_ = now;
    std::erase_if(entries_, [now](const auto& item) { return now - item.second.filled > kValid; });
  }

  /// Exactly `size` bytes from offset 0 (a file that shrank or grew meanwhile: false, and it
  /// is served from its descriptor instead).
  static bool read_whole(int fd, size_t size, std::string& content) {
    content.resize(size);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd, content.data() + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    char extra = 0;
    if (done != size || ::pread(fd, &extra, 1, static_cast<off_t>(size)) != 0) {
      content.clear();
      content.shrink_to_fit();
      return false;
    }
    return true;
  }

  const StaticFiles* owner_ = nullptr;
  std::unordered_map<std::string, Entry> entries_;
  Clock::time_point last_expiry_{};
};

FileCache& file_cache() {
  thread_local FileCache cache;
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
  FileCache& cache = file_cache();
  const FileInfo* cached = cache.find(this, path);
  if (cached != nullptr && cached->has_content) {
    struct stat now {};
    if (::fstatat(root_.get(), cached->opened.c_str(), &now, 0) == 0 &&
        same_file(now, cached->st)) {
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
      // To the normalized path, encoded: the request's own bytes ("//host/..", "/\host/..")
      // would send a browser to another host.
      std::string location;
      http::append_encoded_path(location, path);
      location += '/';
      if (!request.query().empty()) {
        location += '?';
        http::append_encoded_query(location, request.query());
      }
      response.set_status(301);
      response.add_header("Location", location);
      response.set_content_type("text/plain");
      response.set_body("Moved Permanently\n");
      return;
    }
    index_path = (relative == "." ? std::string() : relative) + index_;
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
  if (const FileInfo* kept = cache.store(this, path, fd.get(), info)) {
    if (kept->has_content) fd.reset();
    serve_file(request, response, std::move(fd), *kept);
    return;
  }
  serve_file(request, response, std::move(fd), info);
}

}  // namespace ucp::app
