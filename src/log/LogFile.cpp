#include "LogFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ucp::detail {

bool write_fully(int fd, const char* data, size_t size) noexcept {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string create_parent_directories(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  std::string directory = path.substr(0, slash);
  // Walk down from the top so that each missing level is created in turn.
  for (size_t end = directory.find('/', 1);; end = directory.find('/', end + 1)) {
    std::string prefix = directory.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return "cannot create log directory " + prefix + ": " + std::strerror(errno);
    }
    if (end == std::string::npos) break;
  }
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return "cannot create log directory " + directory + ": " + std::strerror(ENOTDIR);
  }
  return {};
}

LogFile::LogFile(std::string path, uint64_t max_size, uint32_t max_files, bool daily)
    : path_(std::move(path)),
      max_size_(max_size),
      max_files_(max_files),
      day_(RecordFormatter::day_of(static_cast<int64_t>(std::time(nullptr)) * 1000000000)),
      daily_(daily) {
  buffer_.reserve(kBatchBytes);
}

LogFile::~LogFile() { flush(); }

std::unique_ptr<LogFile> LogFile::open(const std::string& path, uint64_t max_size,
                                       uint32_t max_files, std::string& error, bool daily) {
  if (path.empty()) {
    error = "log file path is empty";
    return nullptr;
  }
  error = create_parent_directories(path);
  if (!error.empty()) return nullptr;
  auto file = std::make_unique<LogFile>(path, max_size, max_files, daily);
  error = file->open_path();
  if (!error.empty()) return nullptr;
  return file;
}

std::string LogFile::open_path() {
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot open log file " + path_ + ": " + std::strerror(errno);
  fd_ = UniqueFd(fd);
  struct stat info {};
  size_ =
      ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) ? static_cast<uint64_t>(info.st_size) : 0;
  return {};
}

void LogFile::report_error_once(std::string_view what, int error_number) {
  if (error_reported_) return;
  error_reported_ = true;
  std::fprintf(stderr, "ucp log: %.*s %s: %s\n", static_cast<int>(what.size()), what.data(),
               path_.c_str(), std::strerror(error_number));
}

void LogFile::append(std::string_view line) {
  if (max_size_ > 0 && size_ > 0 && size_ + line.size() > max_size_) roll();
  buffer_.append(line);
  size_ += line.size();
  if (buffer_.size() >= kBatchBytes) flush();
}

void LogFile::write(const LogEntry& entry) {
  if (daily_) {
    const int64_t second = entry.time_ns / 1000000000;
    if (second != day_second_) {  // localtime_r once a second, not once a record
      day_second_ = second;
      day_of_second_ = RecordFormatter::day_of(entry.time_ns);
    }
    roll_if_later_day(day_of_second_);
  }
  append(entry.text);
}

void LogFile::flush() {
  if (buffer_.empty()) return;
  if (!fd_.valid() || !write_fully(fd_.get(), buffer_.data(), buffer_.size())) {
    // Disk full or file gone: say so once on stderr; the server keeps running.
    report_error_once("cannot write log file", fd_.valid() ? errno : EBADF);
  }
  buffer_.clear();
}

void LogFile::roll_if_later_day(int32_t day) {
  if (day <= day_) return;
  day_ = day;
  roll();
}

void LogFile::reopen_path() {
  flush();
  std::string error = create_parent_directories(path_);
  if (error.empty()) error = open_path();  // replaces fd_ only once the new file is open
  if (!error.empty()) {
    std::fprintf(stderr, "ucp log: %s; still writing to the file open before\n", error.c_str());
    return;
  }
  error_reported_ = false;  // a new file: its own errors deserve a line again
}

void LogFile::roll() {
  flush();
  fd_.reset();
  // rename() replaces its target, so shifting from the oldest down drops file max_files.
  for (uint32_t k = max_files_; k >= 2; --k) {
    std::string from = path_ + "." + std::to_string(k - 1);
    std::string to = path_ + "." + std::to_string(k);
    ::rename(from.c_str(), to.c_str());  // ENOENT: fewer files so far
  }
  if (max_files_ >= 1) {
    std::string first = path_ + ".1";
    ::rename(path_.c_str(), first.c_str());
  } else {
    ::unlink(path_.c_str());
  }
  auto error = open_path();
  if (!error.empty()) report_error_once("cannot reopen log file", errno);
  size_ = 0;
}

}  // namespace ucp::detail
