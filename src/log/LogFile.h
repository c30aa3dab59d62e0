#pragma once
// LogFile: the file sink. Buffers whole lines and writes them with write(2) in batches;
// rolls by size and on request (the daily roll):
//
//   server.log  ->  server.log.1  ->  server.log.2  ->  ...  ->  server.log.<max_files>
//   (live)          (newest rolled)                              (oldest; then deleted)
//
// A line never straddles two files: if it would push the live file past max_size, the
// file rolls first (a line longer than max_size gets a file of its own).
//
// One of the logger's sinks, owned by its backend and used by one writer at a time (the
// background thread, or the sync-mode lock holder). Not thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ucp/base/UniqueFd.h"
#include "ucp/log/LogSink.h"

#include "RecordFormatter.h"

namespace ucp::detail {

/// Writes all of `data` to `fd`, retrying on EINTR and short writes. False on error.
bool write_fully(int fd, const char* data, size_t size) noexcept;

/// Creates every missing directory above `path` (like `mkdir -p $(dirname path)`).
/// Returns "" or one error line.
std::string create_parent_directories(const std::string& path);

class LogFile final : public LogSink {
 public:
  static constexpr size_t kBatchBytes = 256 * 1024;  // a full buffer is written at once

  /// Creates missing directories and opens `path` for appending. On failure returns null
  /// and sets `error` to one line naming the path and the reason.
  /// `daily`: also roll when a record's local day is later than the previous one's.
  static std::unique_ptr<LogFile> open(const std::string& path, uint64_t max_size,
                                       uint32_t max_files, std::string& error, bool daily = false);
  /// Use open(); public only for std::make_unique.
  LogFile(std::string path, uint64_t max_size, uint32_t max_files, bool daily);
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  ~LogFile() override;  // writes what is buffered

  /// The record's line (after the daily roll, if due).
  void write(const LogEntry& entry) override;
  void flush() override;
  void reopen() override { reopen_path(); }

  /// Appends one whole line (rolling first if it would not fit under max_size).
  void append(std::string_view line);
  /// Closes the live file, shifts the numbered ones and starts an empty live file.
  void roll();
  /// Writes what is buffered, closes the file and opens the path again (creating the file,
  /// and the directories above it, when they are gone): after logrotate has moved the file
  /// away, lines go to a new file at the configured path. If that fails, lines keep going to
  /// the file already open and the reason is printed once on stderr.
  void reopen_path();
  /// The daily roll: rolls if `day` (RecordFormatter::day_of) is later than the day of the
  /// file's previous line (or of open()). An earlier day (a record stamped before midnight
  /// that arrives after the roll) stays in the new file rather than rolling again.
  void roll_if_later_day(int32_t day);
  bool has_buffered() const noexcept { return !buffer_.empty(); }

 private:
  std::string open_path();
  void report_error_once(std::string_view what, int error_number);

  std::string path_;
  uint64_t max_size_;   // 0: never roll by size
  uint32_t max_files_;  // rolled files kept besides the live one
  UniqueFd fd_;
  uint64_t size_ = 0;  // bytes in the live file, including buffer_
  std::string buffer_;
  bool error_reported_ = false;
  int32_t day_;  // local day of open() or of the latest line seen by roll_if_later_day
  bool daily_;
  int64_t day_second_ = INT64_MIN;  // write(): the second whose local day is day_of_second_
  int32_t day_of_second_ = 0;
};

}  // namespace ucp::detail
