#pragma once
// What configures the logger (the [log] section, docs/logger.md): levels and LogOptions,
// apart from ucp/log/Logger.h so that a header that only passes options on (ServerSections,
// HttpServer) does not bring the LOG_* macros into every program that includes it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ucp {

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kFatal };

std::string_view to_string(LogLevel level) noexcept;
/// Parses TRACE/DEBUG/INFO/WARN/ERROR/FATAL (case-insensitive).
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

enum class QueueFullPolicy : uint8_t { kBlock, kDrop };

/// How each record is written (the [log] format key).
enum class LogFormat : uint8_t {
  kText,  // 2026-11-23 10:55:49.123456 INFO  4711 Server.cpp:42 message
  kJson,  // {"time":"2026-11-23T10:55:49.123456+01:00","level":"INFO","tid":4711,...}
};

/// The time at the front of each record (the [log] time_format key).
enum class LogTimeFormat : uint8_t {
  kLocal,    // 2026-11-23 10:55:49.123456: local time, no offset
  kIso8601,  // 2026-11-23T10:55:49.123456+01:00: local time and its offset from UTC
  kUtc,      // 2026-11-23T09:55:49.123456Z
};

/// Syslog priority prefixes (<6> for INFO...) on console lines, which systemd's journal turns
/// into each line's priority (the [log] journald key).
enum class JournalPrefix : uint8_t {
  kAuto,  // when stdout is the journal (systemd sets JOURNAL_STREAM to its device and inode)
  kOn,
  kOff,
};

class LogSink;

/// The [log] section of the configuration (docs/config.md).
struct LogOptions {
  LogLevel level = LogLevel::kInfo;
  std::string file = "logs/server.log";  // empty: no file sink
  uint64_t max_size = 104857600;         // bytes per file before rolling; 0 = never
  uint32_t max_files = 10;               // rolled files kept besides the live one
  bool daily = false;                    // also roll at local midnight
  bool async = true;                     // false: the caller writes (and waits for) the record
  bool console = true;                   // stdout; colour only on a TTY
  uint32_t flush_interval_ms = 1000;
  uint32_t queue_capacity = 65536;  // records waiting for the background thread
  QueueFullPolicy queue_full_policy = QueueFullPolicy::kBlock;
  LogFormat format = LogFormat::kText;
  LogTimeFormat time_format = LogTimeFormat::kLocal;
  JournalPrefix journald = JournalPrefix::kAuto;
  /// Sinks of the program's own (ucp/log/LogSink.h), written beside the file and the console.
  std::vector<std::shared_ptr<LogSink>> sinks;
};

}  // namespace ucp
