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

/// What a cached or freshly opened file answers with: its validators and, for a small file,
/// its bytes (read once), else the open file (sent through the ring).
struct FileInfo {
  struct stat st {};
  std::string name;           // the file served (a directory's index), for its type
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

/// Files served in the last second, per worker thread. A hit skips openat2 + fstat (a path
/// walk and an inode lookup) and the date and tag formatting; a small file's hit also skips
/// the read: its bytes are kept (at most kContentBytes each, kMaxEntries entries, so at most
/// 4 MiB per thread) and copied into the response. A larger file's entry keeps a descriptor
/// and each response gets a duplicate it closes when sent, so an entry can be dropped at any
/// time. A file replaced or changed on disk is seen at most kValid later, as with nginx's
/// open_file_cache; what a cached small file answers (bytes and validators) is always one
/// consistent snapshot.
class FileCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kContentBytes = 16 * 1024;
  static constexpr auto kValid = std::chrono::milliseconds(1000);

  /// A fresh entry for `path` (a normalized URL path) of `owner`; `fd` gets a duplicate of
  /// its descriptor unless the entry has the file's bytes.
  const FileInfo* find(const StaticFiles* owner, const std::string& path, UniqueFd& fd) {
    if (owner != owner_) return nullptr;
    const auto it = entries_.find(path);
    if (it == entries_.end()) return nullptr;
    if (Clock::now() - it->second.opened > kValid) {
      entries_.erase(it);
      return nullptr;
    }
    if (!it->second.info.has_content) {
      fd = UniqueFd(::fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));
      if (!fd) return nullptr;
    }
    return &it->second.info;
  }

  /// Keeps `info` for `path`: with the bytes of a small regular file (read here, from the
  /// open `fd`), else with a duplicate of `fd`. Returns the entry, or nullptr when the file
  /// could not be kept (the caller then serves `fd` itself).
  const FileInfo* store(const StaticFiles* owner, const std::string& path, int fd, FileInfo info) {
    if (owner != owner_ || entries_.size() >= kMaxEntries) {
      entries_.clear();  // another server's, or full: start over (hits refill it)
      owner_ = owner;
    }
    Entry entry{UniqueFd(), std::move(info), Clock::now()};
    const auto size = static_cast<size_t>(entry.info.st.st_size);
    if (size <= kContentBytes && read_whole(fd, size, entry.info.content)) {
      entry.info.has_content = true;
    } else {
      entry.fd = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
      if (!entry.fd) return nullptr;
    }
    return &entries_.insert_or_assign(path, std::move(entry)).first->second.info;
  }

 private:
  struct Entry {
    UniqueFd fd;  // a large file's descriptor
    FileInfo info;
    Clock::time_point opened;
  };

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
  {
    UniqueFd cached;
    if (const FileInfo* info = cache.find(this, path, cached)) {
      serve_file(request, response, std::move(cached), *info);
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
  FileInfo info;
  info.st = st;
  info.name = name;
  fill_validators(info);
  if (const FileInfo* kept = cache.store(this, path, fd.get(), info)) {
    if (kept->has_content) fd.reset();
    serve_file(request, response, std::move(fd), *kept);
    return;
  }
  serve_file(request, response, std::move(fd), info);
}

}  // namespace ucp::app
