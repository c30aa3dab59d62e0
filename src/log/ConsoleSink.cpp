#include "ConsoleSink.h"

#include <cstdio>
#include <cstdlib>

#include <sys/stat.h>
#include <unistd.h>

#include "LogFile.h"
#include "RecordFormatter.h"

namespace ucp::detail {
namespace {

constexpr size_t kBatchBytes = 64 * 1024;
constexpr std::string_view kReset = "\033[0m";
constexpr std::string_view kColour[] = {
    "\033[37m",    // TRACE: grey
    "\033[36m",    // DEBUG: cyan
    "\033[32m",    // INFO: green
    "\033[33m",    // WARN: yellow
    "\033[31m",    // ERROR: red
    "\033[1;31m",  // FATAL: bold red
};
// syslog(3) priorities: TRACE and DEBUG are debug (7), INFO info (6), WARN warning (4), ERROR
// err (3), FATAL crit (2).
constexpr std::string_view kPriority[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>"};

}  // namespace

bool stdout_is_journal() noexcept {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  struct stat info {};
  if (::fstat(STDOUT_FILENO, &info) != 0) return false;
  return info.st_dev == device && info.st_ino == inode;
}

ConsoleSink::ConsoleSink(int fd, size_t level_offset, bool journal)
    : fd_(fd),
      level_offset_(level_offset),
      journal_(journal),
      colour_(level_offset > 0 && !journal && ::isatty(fd) == 1) {}

void ConsoleSink::append(std::string_view line, LogLevel level) {
  if (journal_) buffer_.append(kPriority[static_cast<size_t>(level)]);
  const size_t level_end = level_offset_ + RecordFormatter::kLevelWidth;
  if (colour_ && line.size() > level_end) {
    buffer_.append(line.substr(0, level_offset_));
    buffer_.append(kColour[static_cast<size_t>(level)]);
    buffer_.append(line.substr(level_offset_, RecordFormatter::kLevelWidth));
    buffer_.append(kReset);
    buffer_.append(line.substr(level_end));
  } else {
    buffer_.append(line);
  }
  if (buffer_.size() >= kBatchBytes) flush();
}

void ConsoleSink::flush() {
  if (buffer_.empty()) return;
  write_fully(fd_, buffer_.data(), buffer_.size());  // nowhere to report a console failure
  buffer_.clear();
}

}  // namespace ucp::detail
