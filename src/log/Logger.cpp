#include "ucp/log/Logger.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

// Interim synchronous implementation (stderr only); the asynchronous logger replaces it
// behind the same API (issue #4).
namespace ucp {
namespace {
std::mutex g_mutex;
}

std::string_view to_string(LogLevel level) noexcept {
  constexpr std::string_view kNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};
  return kNames[static_cast<size_t>(level)];
}

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  for (int i = 0; i <= static_cast<int>(LogLevel::kFatal); ++i) {
    auto name = to_string(static_cast<LogLevel>(i));
    if (name.size() != text.size()) continue;
    bool same = true;
    for (size_t k = 0; k < name.size(); ++k) {
      char c = text[k];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      same = same && c == name[k];
    }
    if (same) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

std::string Logger::init(const LogOptions& options) {
  set_level(options.level);
  return {};
}
void Logger::shutdown() noexcept { std::fflush(stderr); }
uint64_t Logger::dropped() noexcept { return 0; }

void Logger::write(LogLevel level, const char* file, int line, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(us / 1000000);
  std::tm local{};
  localtime_r(&seconds, &local);
  auto line_text = fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06} {:<5} {} {}:{} {}\n",
                               local.tm_year + 1900, local.tm_mon + 1, local.tm_mday,
                               local.tm_hour, local.tm_min, local.tm_sec, us % 1000000,
                               to_string(level), ::syscall(SYS_gettid), file, line, message);
  std::lock_guard lock(g_mutex);
  std::fwrite(line_text.data(), 1, line_text.size(), stderr);
  if (level == LogLevel::kFatal) {
    std::fflush(stderr);
    std::abort();
  }
}

}  // namespace ucp
