#pragma once
// ConsoleSink: writes lines to a terminal stream (stdout for the [log] console sink, stderr
// before init). Colours the level only when the stream is a TTY, so that redirected output
// stays plain text. Buffers lines; flush() writes them.
//
// Owned by the logger backend and used by one writer at a time. Not thread-safe.

#include <string>
#include <string_view>

#include "ucp/log/Logger.h"

namespace ucp::detail {

class ConsoleSink {
 public:
  /// `fd` is not owned (1 or 2).
  explicit ConsoleSink(int fd);
  ConsoleSink(const ConsoleSink&) = delete;
  ConsoleSink& operator=(const ConsoleSink&) = delete;
  ~ConsoleSink() { flush(); }

  /// `line` comes from RecordFormatter (the level sits at its kLevelOffset).
  void append(std::string_view line, LogLevel level);
  void flush();
  bool has_buffered() const noexcept { return !buffer_.empty(); }

 private:
  int fd_;
  bool colour_;
  std::string buffer_;
};

}  // namespace ucp::detail
