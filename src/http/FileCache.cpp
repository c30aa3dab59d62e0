#include "FileCache.h"

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include <unistd.h>

namespace ucp::http::detail {

bool same_file(const struct stat& a, const struct stat& b) noexcept {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

const FileInfo* FileCache::find(const std::string& path) {
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

const FileInfo* FileCache::store(const std::string& path, int fd, FileInfo info) {
  if (entries_.size() >= kMaxEntries) entries_.clear();  // full: start over (hits refill it)
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

void FileCache::expire(Clock::time_point now) {
  // Every entry older than kValid, at most once per kValid.
  if (now - last_expiry_ < kValid) return;
  last_expiry_ = now;
  std::erase_if(entries_, [now](const auto& item) { return now - item.second.filled > kValid; });
}

bool FileCache::read_whole(int fd, size_t size, std::string& content) {
  // Exactly `size` bytes from offset 0 (a file that shrank or grew meanwhile: false, and it
  // is served from its descriptor instead).
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

FileCache& file_cache(uint64_t owner) {
  // A server has one StaticFiles or a few: the last one asked for is remembered, the others
  // are in a short list, the most recent first after a miss. An owner that is gone is never
  // asked for again and falls off the end.
  static constexpr size_t kOwners = 8;
  struct Owned {
    uint64_t owner;
    std::unique_ptr<FileCache> cache;
  };
  thread_local std::vector<Owned> caches;
  thread_local uint64_t last_owner = 0;
  thread_local FileCache* last = nullptr;
  if (owner == last_owner) return *last;
  last_owner = owner;
  for (Owned& owned : caches) {
    if (owned.owner == owner) return *(last = owned.cache.get());
  }
  if (caches.size() == kOwners) caches.pop_back();
  caches.insert(caches.begin(), Owned{owner, std::make_unique<FileCache>()});
  return *(last = caches.front().cache.get());
}

}  // namespace ucp::http::detail
