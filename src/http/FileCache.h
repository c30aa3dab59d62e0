#pragma once
// FileCache: the files a StaticFiles served in the last second, per worker thread. Private to
// src/http.
//
// It holds no descriptor: a descriptor kept for later would pin a deleted file's disk space
// and count against the process's limit while the server is idle (a crawl of many large
// files once left a worker thread with 256 of them). What it keeps is a file's validators
// (its stat, ETag and Last-Modified formatted once) and, for a file up to kContentBytes, its
// bytes (at most kMaxEntries entries, so at most 4 MiB per thread and StaticFiles), copied
// into the response on a hit.
//
// A hit is checked against the file system first, so a change is seen by the next request:
// a small file's entry by one fstatat() of its path (instead of openat2 + fstat + read), a
// larger file's against the fstat of the descriptor the request opens anyway. A file's
// change time moves with every write, chmod or rename over it; on file systems with coarse
// timestamps two writes within one clock tick that keep the size could look alike (Linux
// 6.13+ gives a file whose times were just read fine-grained ones for its next change).
// Entries are dropped after kValid, at the latest when the cache is next used.
//
// Thread contract: one per thread and StaticFiles (file_cache()); never shared.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include <sys/stat.h>

namespace ucp::http::detail {

/// What a cached or freshly opened file answers with: its validators and, for a small file,
/// its bytes (read once), else the open file (sent by the server).
struct FileInfo {
  struct stat st {};
  std::string name;           // the file served (a directory's index)
  std::string_view type;      // its Content-Type (static text)
  std::string opened;         // its path relative to the root, as opened
  std::string tag;            // ETag
  std::string last_modified;  // Last-Modified
  std::string content;        // a small file's bytes (valid when has_content)
  bool has_content = false;
};

/// The same file, unchanged since `a` was taken: same inode, size, modification and change
/// times (a chmod or a rename over it changes the change time).
bool same_file(const struct stat& a, const struct stat& b) noexcept;

class FileCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kContentBytes = 16 * 1024;
  static constexpr auto kValid = std::chrono::milliseconds(1000);

  /// The entry for `path` (a normalized path under the root), if it is fresh; the caller
  /// still checks that the file is unchanged.
  const FileInfo* find(const std::string& path);

  /// Keeps `info` for `path`: with the bytes of a small regular file (read here, from the
  /// open `fd`, and kept only if the file did not change meanwhile). Returns the entry, or
  /// nullptr when it could not be kept (the caller then serves `fd` itself).
  const FileInfo* store(const std::string& path, int fd, FileInfo info);

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    FileInfo info;
    Clock::time_point filled;
  };
  void expire(Clock::time_point now);
  static bool read_whole(int fd, size_t size, std::string& content);

  std::unordered_map<std::string, Entry> entries_;
  Clock::time_point last_expiry_{};
};

/// The calling thread's cache for the StaticFiles numbered `owner` (each has a number of its
/// own, never reused). A thread keeps the caches of its last few owners.
FileCache& file_cache(uint64_t owner);

}  // namespace ucp::http::detail
