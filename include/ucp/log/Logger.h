#pragma once
// The UCP logger (SPEC §6): LOG_TRACE ... LOG_FATAL with fmt format strings checked at
// compile time. When a level is disabled the macro evaluates no argument.
//
// Asynchronous mode (the default): the calling thread formats only the message, into a
// stack buffer, and copies it with a timestamp and its thread id into a slot of a bounded
// lock-free queue (BoundedMpscQueue); one background thread formats the lines and writes
// them to the sinks in batches. ERROR and FATAL wait until their record has been written
// (FATAL then aborts). When the queue is full, the calling thread waits (kBlock) or the
// record is dropped and counted (kDrop; ERROR and FATAL always wait); the background thread
// logs the count.
//
// Thread contract: every function is safe to call from any thread. `init` and `shutdown`
// are called by the application (before workers start / after they stop); they may be
// called again in turn (tests do). Before `init` and after `shutdown`, records go
// synchronously to stderr.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ucp {

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kFatal };

std::string_view to_string(LogLevel level) noexcept;
/// Parses TRACE/DEBUG/INFO/WARN/ERROR/FATAL (case-insensitive).
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

enum class QueueFullPolicy : uint8_t { kBlock, kDrop };

/// The [log] section of the configuration (SPEC §5).
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
};

/// The process-wide logger: static functions over one backend owned by the library
/// (created by init, retired by shutdown). Any thread may log at any time.
class Logger {
 public:
  /// Opens the sinks and starts the background thread. Returns an empty string on success,
  /// else one line saying what is wrong (e.g. "cannot open log file logs/x.log: Permission
  /// denied"); the caller decides to exit.
  static std::string init(const LogOptions& options);
  /// Writes and flushes every record logged so far, stops the background thread.
  static void shutdown() noexcept;
  static void set_level(LogLevel level) noexcept {
    level_.store(static_cast<uint8_t>(level), std::memory_order_relaxed);
  }
  static bool enabled(LogLevel level) noexcept {
    return static_cast<uint8_t>(level) >= level_.load(std::memory_order_relaxed);
  }
  /// Records dropped because the queue was full (policy kDrop), since the process started.
  static uint64_t dropped() noexcept;

  /// Messages up to this size are formatted on the caller's stack and stored inside a queue
  /// slot; longer ones take one heap buffer.
  static constexpr size_t kInlineMessageSize = 200;

  template <class... Args>
  static void log(LogLevel level, const char* file, int line, fmt::format_string<Args...> format,
                  Args&&... args) {
    char message[kInlineMessageSize];  // no allocation, no initialisation: fmt fills it
    auto result =
        fmt::vformat_to_n(message, sizeof message, format, fmt::make_format_args(args...));
    if (result.size <= sizeof message) {
      write(level, file, line, std::string_view(message, result.size));
      return;
    }
    fmt::memory_buffer long_message;
    fmt::vformat_to(std::back_inserter(long_message), format, fmt::make_format_args(args...));
    write(level, file, line, std::string_view(long_message.data(), long_message.size()));
  }
  /// FATAL: the record is written and flushed, then the process aborts.
  static void write(LogLevel level, const char* file, int line, std::string_view message);

 private:
  static inline std::atomic<uint8_t> level_{static_cast<uint8_t>(LogLevel::kInfo)};
};

}  // namespace ucp

#define UCP_LOG_AT(level, ...)                                    \
  do {                                                            \
    if (::ucp::Logger::enabled(level)) {                          \
      ::ucp::Logger::log(level, __FILE__, __LINE__, __VA_ARGS__); \
    }                                                             \
  } while (0)
#define LOG_TRACE(...) UCP_LOG_AT(::ucp::LogLevel::kTrace, __VA_ARGS__)
#define LOG_DEBUG(...) UCP_LOG_AT(::ucp::LogLevel::kDebug, __VA_ARGS__)
#define LOG_INFO(...) UCP_LOG_AT(::ucp::LogLevel::kInfo, __VA_ARGS__)
#define LOG_WARN(...) UCP_LOG_AT(::ucp::LogLevel::kWarn, __VA_ARGS__)
#define LOG_ERROR(...) UCP_LOG_AT(::ucp::LogLevel::kError, __VA_ARGS__)
#define LOG_FATAL(...) UCP_LOG_AT(::ucp::LogLevel::kFatal, __VA_ARGS__)
