#include "RecordFormatter.h"

#include <cstring>
#include <ctime>

namespace ucp::detail {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;

// Level names padded to one width so that the columns after them line up.
constexpr std::string_view kPaddedLevel[] = {"TRACE", "DEBUG", "INFO ", "WARN ", "ERROR", "FATAL"};

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

}  // namespace

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
  put_digits(prefix_, local.tm_year + 1900, 4);
  prefix_[4] = '-';
  put_digits(prefix_ + 5, local.tm_mon + 1, 2);
  prefix_[7] = '-';
  put_digits(prefix_ + 8, local.tm_mday, 2);
  prefix_[10] = ' ';
  put_digits(prefix_ + 11, local.tm_hour, 2);
  prefix_[13] = ':';
  put_digits(prefix_ + 14, local.tm_min, 2);
  prefix_[16] = ':';
  put_digits(prefix_ + 17, local.tm_sec, 2);
  prefix_[19] = '.';
  cached_second_ = second;
  day_ = local.tm_year * 1000 + local.tm_yday;
}

void RecordFormatter::append_prefix(int64_t time_ns, LogLevel level, int32_t tid, const char* file,
                                    int32_t line, fmt::memory_buffer& out) {
  int64_t second = floor_second(time_ns);
  if (second != cached_second_) refresh(second);
  char stamp[kLevelOffset + kLevelWidth + 1];
  std::memcpy(stamp, prefix_, sizeof prefix_);
  put_digits(stamp + sizeof prefix_, (time_ns - second * kNsPerSecond) / 1000, 6);
  stamp[kLevelOffset - 1] = ' ';
  std::memcpy(stamp + kLevelOffset, kPaddedLevel[static_cast<size_t>(level)].data(), kLevelWidth);
  stamp[kLevelOffset + kLevelWidth] = ' ';
  out.append(stamp, stamp + sizeof stamp);
  fmt::format_int tid_text(tid);
  out.append(tid_text.data(), tid_text.data() + tid_text.size());
  out.push_back(' ');
  if (file != last_file_) {  // records from one call site often come in runs
    last_file_ = file;
    last_base_name_ = base_name(file != nullptr ? file : "?");
  }
  std::string_view name = last_base_name_;
  out.append(name.data(), name.data() + name.size());
  out.push_back(':');
  fmt::format_int line_text(line);
  out.append(line_text.data(), line_text.data() + line_text.size());
  out.push_back(' ');
}

}  // namespace ucp::detail
