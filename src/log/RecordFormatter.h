#pragma once
// RecordFormatter: turns a record's raw fields into its line, as [log] format and time_format
// say:
//
//   text, local:   2026-11-23 10:55:49.123456 INFO  4711 Server.cpp:42 message\n
//   text, iso8601: 2026-11-23T10:55:49.123456+01:00 INFO  4711 Server.cpp:42 message\n
//   text, utc:     2026-11-23T09:55:49.123456Z INFO  4711 Server.cpp:42 message\n
//                  ^ 0                     level_offset() ^ (5 chars, padded)
//   json:          {"time":"2026-11-23T10:55:49.123456+01:00","level":"INFO","tid":4711,
//                   "file":"Server.cpp","line":42,"message":"message"}\n   (one line)
//
// JSON lines always carry an ISO-8601 time (with the local offset, or Z for utc); the message
// is escaped as a JSON string (quotes, backslashes, control characters; other bytes as they
// are).
//
// Owned by one writer (the background thread, or the sync-mode lock holder); not
// thread-safe. The time prefix is cached per second, so localtime_r runs once a second rather
// than once a record.

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "ucp/log/LogOptions.h"

namespace ucp::detail {

class RecordFormatter {
 public:
  static constexpr size_t kLevelWidth = 5;

  explicit RecordFormatter(LogFormat format = LogFormat::kText,
                           LogTimeFormat time_format = LogTimeFormat::kLocal) noexcept;

  /// Appends the whole line (with its '\n') to `out`.
  void format(int64_t time_ns, LogLevel level, int32_t tid, const char* file, int32_t line,
              std::string_view message, fmt::memory_buffer& out) {
    append_prefix(time_ns, level, tid, file, line, out);
    append_message(message, out);
    finish(out);
  }
  /// Appends everything before the message (text: "... Server.cpp:42 "; json: up to the
  /// message's opening quote), so that the caller can put the message straight after it.
  void append_prefix(int64_t time_ns, LogLevel level, int32_t tid, const char* file, int32_t line,
                     fmt::memory_buffer& out);
  /// Appends the message (escaped for JSON).
  void append_message(std::string_view message, fmt::memory_buffer& out) const;
  /// Appends what follows the message: '\n' (json: the closing quote and brace first).
  void finish(fmt::memory_buffer& out) const;

  /// Where the level starts in a text line; 0 for JSON (no column to colour).
  size_t level_offset() const noexcept { return format_ == LogFormat::kText ? stamp_size_ + 1 : 0; }
  /// The base name of the file of the last record.
  std::string_view file_name() const noexcept { return last_base_name_; }
  /// Local calendar day (year * 1000 + day of year) of the last formatted record.
  int32_t day() const noexcept { return day_; }
  /// Local calendar day of `time_ns`.
  static int32_t day_of(int64_t time_ns) noexcept;

 private:
  void refresh(int64_t second);

  LogFormat format_;
  LogTimeFormat time_format_;
  int64_t cached_second_ = INT64_MIN;
  int32_t day_ = 0;
  char prefix_[20] = {};  // "YYYY-MM-DD HH:MM:SS." or "YYYY-MM-DDTHH:MM:SS."
  char suffix_[6] = {};   // after the microseconds: "+01:00", "Z" or nothing
  size_t suffix_size_;
  size_t stamp_size_;  // prefix, microseconds, suffix
  const char* last_file_ = nullptr;
  std::string_view last_base_name_ = "?";
};

}  // namespace ucp::detail
