#pragma once
// The UCP logger (docs/logger.md): LOG_TRACE ... LOG_FATAL with fmt format strings checked at
// compile time. When a level is disabled the macro evaluates no argument.
//
// Asynchronous mode (the default): the calling thread copies the format string and the
// arguments (numbers, and the bytes of strings) with a timestamp and its thread id into a
// slot of a bounded lock-free queue (BoundedMpscQueue); one background thread formats the
// messages and lines and writes them to the sinks in batches. Arguments of other types
// (user types with a fmt::formatter, ...) may refer to memory that changes after the
// call, so for those the calling thread formats the message itself, on its stack.
// ERROR and FATAL wait until their record has been written (FATAL then aborts). When the
// queue is full, the calling thread waits (kBlock) or the record is dropped and counted
// (kDrop; ERROR and FATAL always wait); the background thread logs the count.
//
// Thread contract: every function is safe to call from any thread. `init` and `shutdown`
// are called by the application (before workers start / after they stop); they may be
// called again in turn (tests do). Before `init` and after `shutdown`, records go
// synchronously to stderr.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include "ucp/base/Result.h"
#include "ucp/log/LogOptions.h"

namespace ucp {

/// The process-wide logger: static functions over one backend owned by the library
/// (created by init, retired by shutdown). Any thread may log at any time.
class Logger {
 public:
  /// Opens the sinks and starts the background thread. On failure the Error's message is
  /// one line saying what is wrong (e.g. "cannot open log file logs/x.log: Permission
  /// denied"); the caller decides to exit.
  static Result<void, Error> init(const LogOptions& options);
  /// Writes and flushes every record logged so far, stops the background thread.
  static void shutdown() noexcept;
  /// Reopens the log file at its configured path (logrotate: move the file away, then ask
  /// for this, e.g. with SIGUSR1). Any thread; returns at once. Records logged before the
  /// call go to the old file, records logged after it to the new one: the background thread
  /// reopens when it reaches this point of the queue (in sync mode, the caller reopens). The
  /// file and its directories are created if missing; if it cannot be opened, writing goes
  /// on to the old file and one line on stderr says why. No-op before init and after shutdown.
  static void reopen();
  static void set_level(LogLevel level) noexcept {
    level_.store(static_cast<uint8_t>(level), std::memory_order_relaxed);
  }
  static bool enabled(LogLevel level) noexcept {
    return static_cast<uint8_t>(level) >= level_.load(std::memory_order_relaxed);
  }
  /// Records dropped because the queue was full (policy kDrop), since the process started.
  static uint64_t dropped() noexcept;

  /// A message (or a deferred record's format string and arguments) up to this size is
  /// built on the caller's stack and copied into its queue slot; a longer message takes one
  /// heap buffer.
  static constexpr size_t kInlineMessageSize = 200;
  /// Bytes one record takes in the queue (allocated, and touched, at init for every slot of
  /// queue_capacity rounded up to a power of two).
  static constexpr size_t kQueueSlotBytes = 256;

  template <class... Args>
  static void log(LogLevel level, const char* file, int line, fmt::format_string<Args...> format,
                  Args&&... args);
  /// Logs an already formatted message. FATAL: the record is written and flushed, then the
  /// process aborts.
  static void write(LogLevel level, const char* file, int line, std::string_view message);

 private:
  template <class... Args>
  static void log_formatted(LogLevel level, const char* file, int line, fmt::string_view format,
                            Args&... args) {  // `format` was checked at compile time by log()
    char message[kInlineMessageSize];         // no allocation, no initialisation: fmt fills it
    auto result =
        fmt::vformat_to_n(message, sizeof message, format, fmt::make_format_args(args...));
    if (result.size <= sizeof message) {
      write(level, file, line, std::string_view(message, result.size));
      return;
    }
    fmt::memory_buffer long_message;
    fmt::vformat_to(fmt::appender(long_message), format, fmt::make_format_args(args...));
    write(level, file, line, std::string_view(long_message.data(), long_message.size()));
  }
  /// Like write(), but `blob` holds encoded arguments that `format` turns into the message
  /// (on the background thread in async mode).
  static void write_deferred(LogLevel level, const char* file, int line,
                             void (*format)(std::string_view blob, fmt::memory_buffer& out),
                             std::string_view blob);

  static inline std::atomic<uint8_t> level_{static_cast<uint8_t>(LogLevel::kInfo)};
};

namespace detail {

// Deferred formatting. A record's blob holds the format string and then each argument in
// order; the background thread decodes it and calls fmt (all reads and writes go through
// memcpy: nothing in the blob is aligned).
//
//   | u16 format size | format bytes | arg 0 | arg 1 | ...
//   number or void*: its bytes;  string: | u32 size | bytes |
//
// Only types whose value is complete in those bytes are deferred: arithmetic types,
// void pointers and strings (copied). Everything else is formatted at the call site.
template <class T>
struct Deferral {
  static constexpr bool kDeferrable =
      std::is_arithmetic_v<T> || std::is_same_v<T, const void*> || std::is_same_v<T, void*>;
  static constexpr bool kString = false;
};
template <class T>
struct StringDeferral {
  static constexpr bool kDeferrable = true;
  static constexpr bool kString = true;
};
template <>
struct Deferral<const char*> : StringDeferral<const char*> {};
template <>
struct Deferral<char*> : StringDeferral<char*> {};
template <>
struct Deferral<std::string> : StringDeferral<std::string> {};
template <>
struct Deferral<std::string_view> : StringDeferral<std::string_view> {};

template <class... Ts>
inline constexpr bool kAllDeferrable = (Deferral<Ts>::kDeferrable && ...);

class BlobWriter {
 public:
  BlobWriter(char* data, size_t capacity) noexcept : next_(data), end_(data + capacity) {}
  template <class T>
  void put(const T& value) noexcept {
    if constexpr (Deferral<std::decay_t<T>>::kString) {
      put_string(string_of(value));
    } else {
      put_bytes(&value, sizeof value);
    }
  }
  void put_string(std::string_view text) noexcept {
    auto size = static_cast<uint32_t>(text.size());
    put_bytes(&size, sizeof size);
    put_bytes(text.data(), text.size());
  }
  bool ok() const noexcept { return ok_; }
  char* position() const noexcept { return next_; }

 private:
  static std::string_view string_of(const char* text) noexcept {
    return text != nullptr ? std::string_view(text) : std::string_view("(null)");
  }
  static std::string_view string_of(std::string_view text) noexcept { return text; }
  void put_bytes(const void* data, size_t size) noexcept {
    if (static_cast<size_t>(end_ - next_) < size) {
      ok_ = false;
      return;
    }
    std::memcpy(next_, data, size);
    next_ += size;
  }
  char* next_;
  char* end_;
  bool ok_ = true;
};

class BlobReader {
 public:
  explicit BlobReader(const char* data) noexcept : next_(data) {}
  template <class T>
  auto get() noexcept {
    if constexpr (Deferral<T>::kString) {
      auto size = get_value<uint32_t>();
      std::string_view text(next_, size);
      next_ += size;
      return text;
    } else {
      return get_value<T>();
    }
  }

 private:
  template <class T>
  T get_value() noexcept {
    T value;
    std::memcpy(&value, next_, sizeof value);
    next_ += sizeof value;
    return value;
  }
  const char* next_;
};

/// Writes the blob for (format, args...) into `data`; returns its size, or 0 if it does not
/// fit in `capacity` bytes.
template <class... Args>
size_t encode_blob(char* data, size_t capacity, std::string_view format,
                   const Args&... args) noexcept {
  BlobWriter writer(data, capacity);
  writer.put_string(format);
  (writer.put(args), ...);
  return writer.ok() ? static_cast<size_t>(writer.position() - data) : 0;
}

/// Background thread: turns a blob written by encode_blob<Ts...> into the message.
template <class... Ts>
void format_blob(std::string_view blob, fmt::memory_buffer& out) {
  BlobReader reader(blob.data());
  auto format = reader.get<std::string_view>();
  // A braced list evaluates left to right: the arguments are read in the order written.
  std::tuple<decltype(reader.get<Ts>())...> values{reader.get<Ts>()...};
  std::apply(
      [&](auto&... value) {
        fmt::vformat_to(fmt::appender(out), fmt::string_view(format.data(), format.size()),
                        fmt::make_format_args(value...));
      },
      values);
}

}  // namespace detail

template <class... Args>
void Logger::log(LogLevel level, const char* file, int line, fmt::format_string<Args...> format,
                 Args&&... args) {
  if constexpr (detail::kAllDeferrable<std::decay_t<Args>...>) {
    char blob[kInlineMessageSize];
    fmt::string_view text = format;
    size_t size =
        detail::encode_blob(blob, sizeof blob, std::string_view(text.data(), text.size()), args...);
    if (size != 0) {
      write_deferred(level, file, line, &detail::format_blob<std::decay_t<Args>...>,
                     std::string_view(blob, size));
      return;
    }
  }
  log_formatted(level, file, line, fmt::string_view(format), args...);
}

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
