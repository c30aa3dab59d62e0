#include "ConsoleSink.h"

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

}  // namespace

ConsoleSink::ConsoleSink(int fd) : fd_(fd), colour_(::isatty(fd) == 1) {}

void ConsoleSink::append(std::string_view line, LogLevel level) {
  constexpr size_t kLevelEnd = RecordFormatter::kLevelOffset + RecordFormatter::kLevelWidth;
  if (colour_ && line.size() > kLevelEnd) {
    buffer_.append(line.substr(0, RecordFormatter::kLevelOffset));
    buffer_.append(kColour[static_cast<size_t>(level)]);
    buffer_.append(line.substr(RecordFormatter::kLevelOffset, RecordFormatter::kLevelWidth));
    buffer_.append(kReset);
    buffer_.append(line.substr(kLevelEnd));
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
