#pragma once
// ConsoleSink: writes lines to a terminal stream (stdout for the [log] console sink). Colours
// the level only when the stream is a TTY, so that redirected output stays plain text. Under
// systemd's journal each line can start with its syslog priority ("<6>"), which the journal
// takes as the line's priority and strips. Buffers lines; flush() writes them.
//
// One of the logger's sinks, owned by its backend and used by one writer at a time. Not
// thread-safe.

#include <string>
#include <string_view>

#include "ucp/log/LogSink.h"

namespace ucp::detail {

/// True when systemd connected stdout to its journal: JOURNAL_STREAM names stdout's device and
/// inode (systemd.exec(5)).
bool stdout_is_journal() noexcept;

class ConsoleSink final : public LogSink {
 public:
  /// `fd` is not owned (1 or 2). `level_offset`: where the level starts in each line (0: no
  /// column to colour, e.g. JSON). `journal`: start each line with its syslog priority.
  ConsoleSink(int fd, size_t level_offset, bool journal);
  ConsoleSink(const ConsoleSink&) = delete;
  ConsoleSink& operator=(const ConsoleSink&) = delete;
  ~ConsoleSink() override { flush(); }

  void write(const LogEntry& entry) override { append(entry.text, entry.level); }
  void append(std::string_view line, LogLevel level);
  void flush() override;
  bool has_buffered() const noexcept { return !buffer_.empty(); }

 private:
  int fd_;
  size_t level_offset_;
  bool journal_;
  bool colour_;
  std::string buffer_;
};

}  // namespace ucp::detail
