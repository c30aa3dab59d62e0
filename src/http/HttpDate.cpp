#include "ucp/http/HttpDate.h"

#include <cstdint>
#include <cstring>

namespace ucp::http {
namespace {

constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void two_digits(char* out, int value) noexcept {
  out[0] = static_cast<char>('0' + value / 10);
  out[1] = static_cast<char>('0' + value % 10);
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil):
// timegm() would do, but it is not in POSIX and consults the time zone database.
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

/// Reads a fixed-width decimal field; false unless all `width` characters are digits.
bool read_number(std::string_view& text, size_t width, int& value) noexcept {
  if (text.size() < width) return false;
  value = 0;
  for (size_t i = 0; i < width; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  text.remove_prefix(width);
  return true;
}

bool expect(std::string_view& text, std::string_view literal) noexcept {
  if (text.substr(0, literal.size()) != literal) return false;
  text.remove_prefix(literal.size());
  return true;
}

bool read_month(std::string_view& text, int& month) noexcept {
  for (int i = 0; i < 12; ++i) {
    if (expect(text, kMonths[i])) {
      month = i + 1;
      return true;
    }
  }
  return false;
}

bool read_time(std::string_view& text, int& hour, int& minute, int& second) noexcept {
  return read_number(text, 2, hour) && expect(text, ":") && read_number(text, 2, minute) &&
         expect(text, ":") && read_number(text, 2, second);
}

bool to_time(int year, int month, int day, int hour, int minute, int second,
             std::time_t& time) noexcept {
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
  const int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  time = static_cast<std::time_t>(days * 86400 + hour * 3600 + minute * 60 + second);
  return true;
}

}  // namespace

void format_http_date(std::time_t time, char* out) noexcept {
  std::tm tm{};
  gmtime_r(&time, &tm);
  std::memcpy(out, kDays[tm.tm_wday], 3);
  std::memcpy(out + 3, ", ", 2);
  two_digits(out + 5, tm.tm_mday);
  out[7] = ' ';
  std::memcpy(out + 8, kMonths[tm.tm_mon], 3);
  out[11] = ' ';
  const int year = tm.tm_year + 1900;
  two_digits(out + 12, year / 100 % 100);
  two_digits(out + 14, year % 100);
  out[16] = ' ';
  two_digits(out + 17, tm.tm_hour);
  out[19] = ':';
  two_digits(out + 20, tm.tm_min);
  out[22] = ':';
  two_digits(out + 23, tm.tm_sec);
  std::memcpy(out + 25, " GMT", 4);
}

std::string format_http_date(std::time_t time) {
  std::string text(kHttpDateLength, ' ');
  format_http_date(time, text.data());
  return text;
}

bool parse_http_date(std::string_view text, std::time_t& time) noexcept {
  int day = 0;
  int month = 0;
  int year = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  const size_t comma = text.find(',');
  if (comma == 3) {  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    text.remove_prefix(4);
    return expect(text, " ") && read_number(text, 2, day) && expect(text, " ") &&
           read_month(text, month) && expect(text, " ") && read_number(text, 4, year) &&
           expect(text, " ") && read_time(text, hour, minute, second) && expect(text, " GMT") &&
           text.empty() && to_time(year, month, day, hour, minute, second, time);
  }
  if (comma != std::string_view::npos) {  // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
    text.remove_prefix(comma + 1);
    if (!(expect(text, " ") && read_number(text, 2, day) && expect(text, "-") &&
          read_month(text, month) && expect(text, "-") && read_number(text, 2, year) &&
          expect(text, " ") && read_time(text, hour, minute, second) && expect(text, " GMT") &&
          text.empty())) {
      return false;
    }
    year += year < 70 ? 2000 : 1900;  // RFC 9110 §5.6.7: the 50-year rule, simplified
    return to_time(year, month, day, hour, minute, second, time);
  }
  // asctime(): "Sun Nov  6 08:49:37 1994"
  if (text.size() < 4) return false;
  text.remove_prefix(4);
  if (!(read_month(text, month) && expect(text, " "))) return false;
  if (!text.empty() && text.front() == ' ') {
    text.remove_prefix(1);
    if (!read_number(text, 1, day)) return false;
  } else if (!read_number(text, 2, day)) {
    return false;
  }
  return expect(text, " ") && read_time(text, hour, minute, second) && expect(text, " ") &&
         read_number(text, 4, year) && text.empty() &&
         to_time(year, month, day, hour, minute, second, time);
}

std::string_view cached_http_date() noexcept {
  struct Cache {
    std::time_t second = -1;
    char text[kHttpDateLength];
  };
  thread_local Cache cache;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  if (now.tv_sec != cache.second) {
    cache.second = now.tv_sec;
    format_http_date(now.tv_sec, cache.text);
  }
  return {cache.text, kHttpDateLength};
}

}  // namespace ucp::http
