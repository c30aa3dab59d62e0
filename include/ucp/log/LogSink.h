#pragma once
// LogSink: where log records go. The logger writes every record to its sinks: the file and the
// console ([log] file, console) are two, and a program adds its own through LogOptions::sinks
// (or Application::add_log_sink), for a log shipper, a ring of recent lines for a debug page,
// a test:
//
//   class RecentLines final : public ucp::LogSink {
//    public:
//     void write(const ucp::LogEntry& entry) override { lines_.emplace_back(entry.text); }
//    private:
//     std::deque<std::string> lines_;
//   };
//   ucp::LogOptions options;
//   options.sinks.push_back(std::make_shared<RecentLines>());
//   ucp::Logger::init(options);
//
// Thread contract: the logger calls a sink from one thread at a time (its background thread, or
// in sync mode the logging thread, under the writer's lock), never concurrently; a sink that
// other threads read guards that itself. A sink must not log (it would wait for itself).

#include <cstdint>
#include <string_view>

#include "ucp/log/LogOptions.h"

namespace ucp {

/// One record, as the sinks get it. Every view is valid during write() only.
struct LogEntry {
  int64_t time_ns = 0;  // CLOCK_REALTIME at the call, in nanoseconds
  LogLevel level = LogLevel::kInfo;
  int32_t tid = 0;           // the logging thread's id (gettid)
  std::string_view file;     // the source file's name, without its directories
  int32_t line = 0;          // ... and line
  std::string_view message;  // the formatted message
  std::string_view text;     // the whole line in the configured format, ending in '\n'
};

class LogSink {
 public:
  virtual ~LogSink() = default;
  /// One record. What the sink buffers it writes by flush().
  virtual void write(const LogEntry& entry) = 0;
  /// Every flush_interval_ms, before an ERROR or FATAL call returns, and at shutdown.
  virtual void flush() {}
  /// Logger::reopen() (SIGUSR1): a sink with a file opens its path again (logrotate).
  virtual void reopen() {}
};

}  // namespace ucp
