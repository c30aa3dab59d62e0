// What the [log] format and time_format options write, and sinks of a program's own, through
// the public API (Logger::init, LOG_*): records go to the file and to the program's sink alike.

#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/log/LogSink.h"
#include "ucp/log/Logger.h"

#include "ErrorText.h"
#include "LogTestUtil.h"

namespace ucp {
namespace {

using test::read_lines;
using test::TempDir;

/// Keeps every entry it is given (copies: the views live during write() only).
class Recorder final : public LogSink {
 public:
  struct Kept {
    LogLevel level;
    std::string file;
    int32_t line;
    std::string message;
    std::string text;
  };
  void write(const LogEntry& entry) override {
    std::lock_guard lock(mutex_);
    kept_.push_back({entry.level, std::string(entry.file), entry.line, std::string(entry.message),
                     std::string(entry.text)});
  }
  void flush() override {
    std::lock_guard lock(mutex_);
    ++flushes_;
  }
  void reopen() override {
    std::lock_guard lock(mutex_);
    ++reopens_;
  }
  std::vector<Kept> kept() {
    std::lock_guard lock(mutex_);
    return kept_;
  }
  int flushes() {
    std::lock_guard lock(mutex_);
    return flushes_;
  }
  int reopens() {
    std::lock_guard lock(mutex_);
    return reopens_;
  }

 private:
  std::mutex mutex_;
  std::vector<Kept> kept_;
  int flushes_ = 0;
  int reopens_ = 0;
};

/// Sets TZ for the test (a POSIX rule, no tzdata needed) and puts the old one back.
class TimeZone {
 public:
  explicit TimeZone(const char* rule) {
    if (const char* old = std::getenv("TZ")) saved_ = old;
    had_ = std::getenv("TZ") != nullptr;
    ::setenv("TZ", rule, 1);
    ::tzset();
  }
  ~TimeZone() {
    if (had_) {
      ::setenv("TZ", saved_.c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }

 private:
  std::string saved_;
  bool had_ = false;
};

class LogOutput : public ::testing::Test {
 protected:
  LogOptions options(const std::string& name) {
    LogOptions o;
    o.level = LogLevel::kTrace;
    o.file = dir_ / name;
    o.console = false;
    return o;
  }
  void TearDown() override {
    Logger::shutdown();
    Logger::set_level(LogLevel::kInfo);
  }
  TempDir dir_;
};

TEST_F(LogOutput, Iso8601TimesCarryTheLocalOffset) {
  TimeZone zone("UCP-05:30");  // POSIX: UTC+5:30 is written with a minus
  auto o = options("iso.log");
  o.time_format = LogTimeFormat::kIso8601;
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  LOG_INFO("with an offset");
  Logger::shutdown();
  auto lines = read_lines(dir_ / "iso.log");
  ASSERT_EQ(lines.size(), 1u);
  const std::regex shape(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+05:30 INFO  \d+ )"
                         R"(LogFormat_test\.cpp:\d+ with an offset)");
  EXPECT_TRUE(std::regex_match(lines[0], shape)) << lines[0];
}

TEST_F(LogOutput, UtcTimesEndInZ) {
  TimeZone zone("UCP-05:30");
  auto o = options("utc.log");
  o.time_format = LogTimeFormat::kUtc;
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  const std::time_t before = std::time(nullptr);
  LOG_WARN("in UTC");
  Logger::shutdown();
  auto lines = read_lines(dir_ / "utc.log");
  ASSERT_EQ(lines.size(), 1u);
  const std::regex shape(R"(\d{4}-\d\d-\d\dT(\d\d):\d\d:\d\d\.\d{6}Z WARN  \d+ )"
                         R"(LogFormat_test\.cpp:\d+ in UTC)");
  std::smatch match;
  ASSERT_TRUE(std::regex_match(lines[0], match, shape)) << lines[0];
  std::tm utc{};
  gmtime_r(&before, &utc);
  const int hour = std::stoi(match[1].str());
  EXPECT_TRUE(hour == utc.tm_hour || hour == (utc.tm_hour + 1) % 24) << "not the UTC hour";
}

TEST_F(LogOutput, JsonLinesCarryEveryFieldEscaped) {
  TimeZone zone("UCP-01");
  auto o = options("json.log");
  o.format = LogFormat::kJson;
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  LOG_INFO("user {} said \"{}\"", "bob", "a\\b\tc");  // deferred: formatted on the writer
  const int line = __LINE__ - 1;
  Logger::write(LogLevel::kError, "/src/app/Main.cpp", 7, "two\nlines \x01");
  Logger::shutdown();
  auto lines = read_lines(dir_ / "json.log");
  ASSERT_EQ(lines.size(), 2u);
  const std::regex first(
      R"(\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+01:00","level":"INFO","tid":\d+,)"
      R"("file":"LogFormat_test\.cpp","line":)" +
      std::to_string(line) + R"(,"message":"user bob said \\"a\\\\b\\tc\\""\})");
  EXPECT_TRUE(std::regex_match(lines[0], first)) << lines[0];
  const std::regex second(R"(\{"time":"[^"]+","level":"ERROR","tid":\d+,"file":"Main\.cpp",)"
                          R"("line":7,"message":"two\\nlines \\u0001"\})");
  EXPECT_TRUE(std::regex_match(lines[1], second)) << lines[1];
}

TEST_F(LogOutput, JsonInUtcToo) {
  auto o = options("json_utc.log");
  o.format = LogFormat::kJson;
  o.time_format = LogTimeFormat::kUtc;
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  LOG_INFO("x");
  Logger::shutdown();
  auto lines = read_lines(dir_ / "json_utc.log");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_search(lines[0], std::regex(R"(^\{"time":"[^"]+\.\d{6}Z",)"))) << lines[0];
}

// A program's sink gets every record the file gets, with its fields apart, and the flushes and
// reopens; an ERROR returns once it has been written to every sink.
TEST_F(LogOutput, AProgramsOwnSinkGetsEveryRecord) {
  auto recorder = std::make_shared<Recorder>();
  auto o = options("with_sink.log");
  o.sinks.push_back(recorder);
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  LOG_DEBUG("number {}", 42);
  const int line = __LINE__ - 1;
  LOG_ERROR("went {}", std::string("wrong"));
  ASSERT_EQ(recorder->kept().size(), 2u) << "ERROR returned before every sink had it";
  Logger::reopen();
  Logger::shutdown();
  const auto kept = recorder->kept();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].level, LogLevel::kDebug);
  EXPECT_EQ(kept[0].file, "LogFormat_test.cpp");
  EXPECT_EQ(kept[0].line, line);
  EXPECT_EQ(kept[0].message, "number 42");
  EXPECT_EQ(kept[1].level, LogLevel::kError);
  EXPECT_EQ(kept[1].message, "went wrong");
  const auto lines = read_lines(dir_ / "with_sink.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(kept[0].text, lines[0] + "\n");
  EXPECT_EQ(kept[1].text, lines[1] + "\n");
  EXPECT_GE(recorder->flushes(), 2);  // the ERROR's and shutdown's
  EXPECT_EQ(recorder->reopens(), 1);
}

TEST_F(LogOutput, ASinkAloneIsEnoughAndSyncModeUsesItToo) {
  auto recorder = std::make_shared<Recorder>();
  LogOptions o;
  o.file = "";
  o.console = false;
  o.async = false;
  o.sinks.push_back(recorder);
  ASSERT_EQ(test::error_text(Logger::init(o)), "");
  LOG_INFO("only to the sink");
  ASSERT_EQ(recorder->kept().size(), 1u) << "sync mode: written before the call returned";
  EXPECT_EQ(recorder->kept()[0].message, "only to the sink");
}

}  // namespace
}  // namespace ucp
