#include "RecordFormatter.h"

#include <cstring>
#include <ctime>

namespace ucp::detail {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;

// Level names padded to one width so that the columns after them line up.
constexpr std::string_view kPaddedLevel[] = {"TRACE", "DEBUG", "INFO ", "WARN ", "ERROR", "FATAL"};
constexpr std::string_view kLevel[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};

std::string_view base_name(const char* path) noexcept {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? std::string_view(slash + 1) : std::string_view(path);
}

void put_digits(char* out, int64_t value, int width) noexcept {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

int64_t floor_second(int64_t time_ns) noexcept {
  int64_t second = time_ns / kNsPerSecond;
  return time_ns % kNsPerSecond < 0 ? second - 1 : second;
}

void append(fmt::memory_buffer& out, std::string_view text) {
  out.append(text.data(), text.data() + text.size());
}

// Appends `text` as the inside of a JSON string.
void append_json_escaped(fmt::memory_buffer& out, std::string_view text) {
  constexpr char kHex[] = "0123456789abcdef";
  size_t plain = 0;  // start of the run of bytes that need no escape
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    append(out, text.substr(plain, i - plain));
    plain = i + 1;
    switch (c) {
      case '"':
        append(out, "\\\"");
        break;
      case '\\':
        append(out, "\\\\");
        break;
      case '\n':
        append(out, "\\n");
        break;
      case '\r':
        append(out, "\\r");
        break;
      case '\t':
        append(out, "\\t");
        break;
      default: {
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
        out.append(escaped, escaped + sizeof escaped);
      }
    }
  }
  append(out, text.substr(plain));
}

}  // namespace

RecordFormatter::RecordFormatter(LogFormat format, LogTimeFormat time_format) noexcept
    : format_(format),
      // JSON consumers need an unambiguous time: the local one gets its offset.
      time_format_(format == LogFormat::kJson && time_format == LogTimeFormat::kLocal
                       ? LogTimeFormat::kIso8601
                       : time_format),
      suffix_size_(time_format_ == LogTimeFormat::kIso8601 ? 6
                   : time_format_ == LogTimeFormat::kUtc   ? 1
                                                           : 0),
      stamp_size_(sizeof prefix_ + 6 + suffix_size_) {}

int32_t RecordFormatter::day_of(int64_t time_ns) noexcept {
  auto seconds = static_cast<std::time_t>(floor_second(time_ns));
  std::tm local{};
  localtime_r(&seconds, &local);
  return local.tm_year * 1000 + local.tm_yday;
}

void RecordFormatter::refresh(int64_t second) {
  auto seconds = static_cast<std::time_t>(second);
  std::tm local{};
  localtime_r(&seconds, &local);
  day_ = local.tm_year * 1000 + local.tm_yday;  // the daily roll goes by local days
  std::tm shown = local;
  if (time_format_ == LogTimeFormat::kUtc) gmtime_r(&seconds, &shown);
  put_digits(prefix_, shown.tm_year + 1900, 4);
  prefix_[4] = '-';
  put_digits(prefix_ + 5, shown.tm_mon + 1, 2);
  prefix_[7] = '-';
  put_digits(prefix_ + 8, shown.tm_mday, 2);
  prefix_[10] = time_format_ == LogTimeFormat::kLocal ? ' ' : 'T';
  put_digits(prefix_ + 11, shown.tm_hour, 2);
  prefix_[13] = ':';
  put_digits(prefix_ + 14, shown.tm_min, 2);
  prefix_[16] = ':';
  put_digits(prefix_ + 17, shown.tm_sec, 2);
  prefix_[19] = '.';
  switch (time_format_) {
    case LogTimeFormat::kLocal:
      break;
    case LogTimeFormat::kUtc:
      suffix_[0] = 'Z';
      break;
    case LogTimeFormat::kIso8601: {
      const long offset_minutes = local.tm_gmtoff / 60;
      const long minutes = offset_minutes < 0 ? -offset_minutes : offset_minutes;
      suffix_[0] = offset_minutes < 0 ? '-' : '+';
      put_digits(suffix_ + 1, minutes / 60, 2);
      suffix_[3] = ':';
      put_digits(suffix_ + 4, minutes % 60, 2);
      break;
    }
  }
  cached_second_ = second;
}

void RecordFormatter::append_prefix(int64_t time_ns, LogLevel level, int32_t tid, const char* file,
                                    int32_t line, fmt::memory_buffer& out) {
  int64_t second = floor_second(time_ns);
  if (second != cached_second_) refresh(second);
  if (file != last_file_) {  // records from one call site often come in runs
    last_file_ = file;
    last_base_name_ = base_name(file != nullptr ? file : "?");
  }
  // The time, the level and the spaces around it, in one append.
  char stamp[sizeof prefix_ + 6 + sizeof suffix_ + 1 + kLevelWidth + 1];
  std::memcpy(stamp, prefix_, sizeof prefix_);
  put_digits(stamp + sizeof prefix_, (time_ns - second * kNsPerSecond) / 1000, 6);
  std::memcpy(stamp + sizeof prefix_ + 6, suffix_, suffix_size_);
  fmt::format_int tid_text(tid);
  fmt::format_int line_text(line);
  const std::string_view name = last_base_name_;
  if (format_ == LogFormat::kJson) {
    append(out, "{\"time\":\"");
    out.append(stamp, stamp + stamp_size_);
    append(out, "\",\"level\":\"");
    append(out, kLevel[static_cast<size_t>(level)]);
    append(out, "\",\"tid\":");
    out.append(tid_text.data(), tid_text.data() + tid_text.size());
    append(out, ",\"file\":\"");
    append_json_escaped(out, name);
    append(out, "\",\"line\":");
    out.append(line_text.data(), line_text.data() + line_text.size());
    append(out, ",\"message\":\"");
    return;
  }
  char* level_at = stamp + stamp_size_;
  level_at[0] = ' ';
  std::memcpy(level_at + 1, kPaddedLevel[static_cast<size_t>(level)].data(), kLevelWidth);
  level_at[1 + kLevelWidth] = ' ';
  out.append(stamp, level_at + kLevelWidth + 2);
  out.append(tid_text.data(), tid_text.data() + tid_text.size());
  out.push_back(' ');
  out.append(name.data(), name.data() + name.size());
  out.push_back(':');
  out.append(line_text.data(), line_text.data() + line_text.size());
  out.push_back(' ');
}

void RecordFormatter::append_message(std::string_view message, fmt::memory_buffer& out) const {
  if (format_ == LogFormat::kJson) {
    append_json_escaped(out, message);
  } else {
    append(out, message);
  }
}

void RecordFormatter::finish(fmt::memory_buffer& out) const {
  if (format_ == LogFormat::kJson) append(out, "\"}");
  out.push_back('\n');
}

}  // namespace ucp::detail
