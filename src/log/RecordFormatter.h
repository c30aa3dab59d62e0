#pragma once
// RecordFormatter: turns a record's raw fields into its text line
//
//   2026-11-23 10:55:49.123456 INFO  4711 Server.cpp:42 message\n
//   ^ 0                        ^ kLevelOffset (5 chars, padded)
//
// Owned by one writer (the background thread, or the sync-mode lock holder); not
// thread-safe. The "YYYY-MM-DD HH:MM:SS." prefix is cached per second, so localtime_r runs
// once a second rather than once a record.

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "ucp/log/Logger.h"

namespace ucp::detail {

class RecordFormatter {
 public:
  static constexpr size_t kLevelOffset = 27;
  static constexpr size_t kLevelWidth = 5;

  /// Appends the line (with its '\n') to `out`.
  void format(int64_t time_ns, LogLevel level, int32_t tid, const char* file, int32_t line,
              std::string_view message, fmt::memory_buffer& out) {
    append_prefix(time_ns, level, tid, file, line, out);
    out.append(message.data(), message.data() + message.size());
    out.push_back('\n');
  }
  /// Appends everything before the message ("... Server.cpp:42 "), so that the caller can
  /// format the message straight after it.
  void append_prefix(int64_t time_ns, LogLevel level, int32_t tid, const char* file, int32_t line,
                     fmt::memory_buffer& out);
  /// Local calendar day (year * 1000 + day of year) of the last formatted record.
  int32_t day() const noexcept { return day_; }
  /// Local calendar day of `time_ns`.
  static int32_t day_of(int64_t time_ns) noexcept;

 private:
  void refresh(int64_t second);

  int64_t cached_second_ = INT64_MIN;
  int32_t day_ = 0;
  char prefix_[20] = {};  // "YYYY-MM-DD HH:MM:SS."
  const char* last_file_ = nullptr;
  std::string_view last_base_name_ = "?";
};

}  // namespace ucp::detail
