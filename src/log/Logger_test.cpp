#include "ucp/log/Logger.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ErrorText.h"
#include "LogTestUtil.h"

namespace ucp {
namespace {

using test::exists;
using test::read_lines;
using test::TempDir;

LogOptions file_options(const std::string& path) {
  LogOptions options;
  options.level = LogLevel::kTrace;
  options.file = path;
  options.console = false;
  options.flush_interval_ms = 60000;  // only shutdown, ERROR or a full buffer write the file
  return options;
}

size_t count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  size_t n = 0;
  for (auto& line : lines) n += line.find(needle) != std::string::npos;
  return n;
}

// Every test starts and ends with the logger shut down (it is a process-wide singleton).
class LoggerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    Logger::shutdown();
    Logger::set_level(LogLevel::kInfo);
  }
  TempDir dir_;
};

TEST_F(LoggerTest, RecordHasLocalTimestampLevelThreadAndLocation) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  LOG_INFO("Server started on {}:{}", "0.0.0.0", 8888);
  int line = __LINE__ - 1;
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 1u);
  std::regex shape(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} INFO  \d+ Logger_test\.cpp:(\d+) )"
                   R"(Server started on 0\.0\.0\.0:8888)");
  std::smatch match;
  ASSERT_TRUE(std::regex_match(lines[0], match, shape)) << lines[0];
  EXPECT_EQ(match[1].str(), std::to_string(line));
  char today[16];
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(today, sizeof today, "%Y-%m-%d", &local);
  EXPECT_EQ(lines[0].substr(0, 10), today);  // local time, not UTC (unless TZ says so)
}

// logrotate: the live file is moved away, then reopen(). Records logged before the call end
// in the moved file, records logged after it in a new file at the configured path.
TEST_F(LoggerTest, ReopenStartsANewFileAtThePathAfterTheOldOneWasMoved) {
  for (bool async : {true, false}) {
    SCOPED_TRACE(async ? "async" : "sync");
    const std::string path = dir_ / (async ? "async.log" : "sync.log");
    auto options = file_options(path);
    options.async = async;
    ASSERT_EQ(test::error_text(Logger::init(options)), "");
    LOG_INFO("before-{}", 1);
    LOG_INFO("before-{}", 2);
    std::filesystem::rename(path, path + ".1");  // the writer may still hold lines: fine
    Logger::reopen();
    LOG_INFO("after-{}", 1);
    Logger::shutdown();
    auto old_lines = read_lines(path + ".1");
    auto new_lines = read_lines(path);
    EXPECT_EQ(count_containing(old_lines, "before-"), 2u);
    EXPECT_EQ(count_containing(old_lines, "after-"), 0u);
    ASSERT_EQ(new_lines.size(), 1u);
    EXPECT_NE(new_lines[0].find("after-1"), std::string::npos) << new_lines[0];
  }
}

TEST_F(LoggerTest, ReopenFromManyThreadsWhileTheyLogLosesNoRecord) {
  const std::string path = dir_ / "busy.log";
  auto options = file_options(path);
  options.queue_capacity = 64;  // full queue: reopen requests must wait, never be dropped
  options.queue_full_policy = QueueFullPolicy::kDrop;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  constexpr int kThreads = 4;
  constexpr int kRecords = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kRecords; ++i) {
        if (i % 500 == 0) Logger::reopen();
        LOG_ERROR("t{} r{}", t, i);  // ERROR waits for its write: none is dropped
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Logger::shutdown();
  EXPECT_EQ(count_containing(read_lines(path), " r"), size_t{kThreads} * kRecords);
}

TEST_F(LoggerTest, ReopenRecreatesAMissingDirectoryAndIsANoOpWithoutALogger) {
  Logger::reopen();  // before init: nothing to do, nothing to crash
  const std::string path = dir_ / "sub/server.log";
  ASSERT_EQ(test::error_text(Logger::init(file_options(path))), "");
  LOG_INFO("first");
  Logger::reopen();
  LOG_INFO("flushed");
  LOG_ERROR("wait for the writer");  // ERROR returns once written: the reopen is done
  std::filesystem::remove_all(dir_ / "sub");
  Logger::reopen();
  LOG_INFO("second");
  Logger::shutdown();
  Logger::reopen();  // after shutdown: no-op
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("second"), std::string::npos);
}

TEST_F(LoggerTest, FiltersLevelsAndChangesThemAtRunTime) {
  auto options = file_options(dir_ / "server.log");
  options.level = LogLevel::kWarn;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  LOG_TRACE("trace-1");
  LOG_DEBUG("debug-1");
  LOG_INFO("info-1");
  LOG_WARN("warn-1");
  Logger::set_level(LogLevel::kDebug);
  LOG_TRACE("trace-2");
  LOG_DEBUG("debug-2");
  EXPECT_FALSE(Logger::enabled(LogLevel::kTrace));
  EXPECT_TRUE(Logger::enabled(LogLevel::kFatal));
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(" WARN  "), std::string::npos);
  EXPECT_NE(lines[0].find("warn-1"), std::string::npos);
  EXPECT_NE(lines[1].find(" DEBUG "), std::string::npos);
  EXPECT_NE(lines[1].find("debug-2"), std::string::npos);
}

TEST_F(LoggerTest, DisabledLevelDoesNotEvaluateArguments) {
  auto options = file_options(dir_ / "server.log");
  options.level = LogLevel::kError;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  int evaluated = 0;
  auto costly = [&evaluated] { return ++evaluated; };
  LOG_DEBUG("value {}", costly());
  LOG_INFO("value {}", costly());
  LOG_WARN("value {}", costly());
  EXPECT_EQ(evaluated, 0);
  LOG_ERROR("value {}", costly());
  EXPECT_EQ(evaluated, 1);
}

TEST(LogLevelText, ParsesNamesCaseInsensitively) {
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("TRACE"), LogLevel::kTrace);
  EXPECT_EQ(parse_log_level("Fatal"), LogLevel::kFatal);
  EXPECT_FALSE(parse_log_level("verbose").has_value());
  EXPECT_EQ(to_string(LogLevel::kWarn), "WARN");
}

TEST_F(LoggerTest, CleanShutdownWritesEveryRecord) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  for (int i = 0; i < 5000; ++i) LOG_INFO("record {}", i);
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 5000u);
  EXPECT_NE(lines.back().find("record 4999"), std::string::npos);
}

TEST_F(LoggerTest, ErrorIsWrittenBeforeTheCallReturns) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  LOG_INFO("before the error");
  LOG_ERROR("disk {} failed", "sda");
  auto lines = read_lines(dir_ / "server.log");  // no shutdown, flush interval is 60 s
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find(" ERROR "), std::string::npos);
  EXPECT_NE(lines[1].find("disk sda failed"), std::string::npos);
}

TEST_F(LoggerTest, SyncModeWritesBeforeTheCallReturns) {
  auto options = file_options(dir_ / "server.log");
  options.async = false;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  LOG_INFO("sync {}", 1);
  LOG_DEBUG("sync {}", 2);
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("sync 2"), std::string::npos);
}

TEST_F(LoggerTest, FlushesEveryFlushInterval) {
  auto options = file_options(dir_ / "server.log");
  options.flush_interval_ms = 10;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  LOG_INFO("flushed by the timer");
  // Bounded wait (no timing assertion): the record must show up without shutdown.
  bool seen = false;
  for (int i = 0; i < 1000 && !seen; ++i) {
    seen = read_lines(dir_ / "server.log").size() == 1;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen);
}

TEST_F(LoggerTest, LongMessagesAreKeptWhole) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  std::string big(10000, 'z');
  LOG_INFO("big {} end", big);
  LOG_INFO("exactly {}", std::string(Logger::kInlineMessageSize - 8, 'e'));
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("big " + big + " end"), std::string::npos);
  EXPECT_NE(lines[1].find("exactly " + std::string(Logger::kInlineMessageSize - 8, 'e')),
            std::string::npos);
}

struct Point {
  int x = 0;
  int y = 0;
};

}  // namespace
}  // namespace ucp

template <>
struct fmt::formatter<ucp::Point> : fmt::formatter<std::string_view> {
  auto format(const ucp::Point& p, fmt::format_context& context) const {
    return fmt::format_to(context.out(), "({}, {})", p.x, p.y);
  }
};

namespace ucp {
namespace {

// The background thread formats deferred records; whatever the argument types, the text
// must be what fmt::format gives at the call site.
TEST_F(LoggerTest, DeferredAndCallSiteFormattingGiveTheSameText) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  std::vector<std::string> expected;
#define CHECK_SAME(...)                           \
  do {                                            \
    LOG_INFO(__VA_ARGS__);                        \
    expected.push_back(fmt::format(__VA_ARGS__)); \
  } while (0)
  std::string owned = "owned string";
  std::string_view view = "a view";
  const char* null_text = nullptr;
  char mutable_text[] = "mutable";
  int local = 7;
  Point point{3, 4};
  CHECK_SAME("ints {} {} {} {}", -1, 42u, int64_t{-1234567890123}, uint8_t{200});
  CHECK_SAME("floats {} {:.3f} {:e} {:>10.2f}|", 0.1, 3.14159, 1e-9, -2.5f);
  CHECK_SAME("bool {} char {} {:d}", true, 'x', 'A');
  CHECK_SAME("strings {} [{:>14}] [{:<8}] {} {}", owned, view, "lit", mutable_text,
             std::string("temporary"));
  CHECK_SAME("pointer {}", static_cast<const void*>(&local));
  CHECK_SAME("user type {} and {}", point, 5);  // formatted at the call site
  CHECK_SAME("no arguments, {{braces}}");
  CHECK_SAME("long {}", std::string(500, 'L'));  // does not fit a slot: call site
  CHECK_SAME("hex {:#x} {:08b}", 255, 5);
#undef CHECK_SAME
  LOG_INFO("null {}", null_text);
  expected.push_back("null (null)");
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), expected.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    auto at = lines[i].find(' ', lines[i].find(".cpp:"));
    ASSERT_NE(at, std::string::npos) << lines[i];
    EXPECT_EQ(lines[i].substr(at + 1), expected[i]);
  }
}

// A deferred record owns copies of its strings and of its format string: the caller may
// change them as soon as the call returns.
TEST_F(LoggerTest, DeferredRecordsCopyStringsAndRuntimeFormats) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "server.log"))), "");
  std::string text = "first";
  std::string format = "runtime {} {}";
  LOG_INFO(fmt::runtime(format), text, 1);
  text = "changed";
  format = "XXXXXXX {} {}";
  LOG_INFO(fmt::runtime("bad {:d}"), "not a number");  // reported, never thrown
  Logger::shutdown();
  auto lines = read_lines(dir_ / "server.log");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("runtime first 1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("[log format error"), std::string::npos) << lines[1];
}

TEST_F(LoggerTest, CreatesMissingDirectories) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "logs/deep/server.log"))), "");
  LOG_WARN("here");
  Logger::shutdown();
  EXPECT_EQ(read_lines(dir_ / "logs/deep/server.log").size(), 1u);
}

TEST_F(LoggerTest, UnwritablePathReturnsAnErrorLine) {
  { std::ofstream(dir_ / "blocker") << "a regular file, not a directory"; }
  std::string error =
      test::error_text(Logger::init(file_options(dir_ / "blocker/logs/server.log")));
  EXPECT_NE(error.find("cannot create log directory"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  std::filesystem::create_directory(dir_ / "isdir.log");
  error = test::error_text(Logger::init(file_options(dir_ / "isdir.log")));
  EXPECT_NE(error.find("cannot open log file"), std::string::npos) << error;
  LOG_INFO("still usable after a failed init");  // goes to stderr; must not crash
}

TEST_F(LoggerTest, InitAgainAndShutdownTwiceAreSafe) {
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "one.log"))), "");
  LOG_INFO("first");
  ASSERT_EQ(test::error_text(Logger::init(file_options(dir_ / "two.log"))),
            "");  // replaces the first
  LOG_INFO("second");
  Logger::shutdown();
  Logger::shutdown();
  EXPECT_EQ(read_lines(dir_ / "one.log").size(), 1u);
  EXPECT_EQ(read_lines(dir_ / "two.log").size(), 1u);
}

// Rolling through the logger: exactly max_files rolled files, and the newest records all
// present in order (older ones were deleted with the oldest file, as configured).
TEST_F(LoggerTest, RollingKeepsExactlyMaxFilesAndLosesNoRecordAcrossRotations) {
  constexpr int kRecords = 20000;
  auto options = file_options(dir_ / "server.log");
  options.max_size = 64 * 1024;
  options.max_files = 3;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  for (int i = 0; i < kRecords; ++i) LOG_INFO("seq={}", i);
  Logger::shutdown();
  EXPECT_TRUE(exists(dir_ / "server.log.3"));
  EXPECT_FALSE(exists(dir_ / "server.log.4"));
  std::vector<int> seqs;
  for (std::string name : {"server.log.3", "server.log.2", "server.log.1", "server.log"}) {
    EXPECT_LE(std::filesystem::file_size(dir_ / name), options.max_size);
    for (auto& line : read_lines(dir_ / name)) {
      auto at = line.find("seq=");
      ASSERT_NE(at, std::string::npos) << line;
      seqs.push_back(std::stoi(line.substr(at + 4)));
    }
  }
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs.back(), kRecords - 1);
  for (size_t k = 1; k < seqs.size(); ++k) ASSERT_EQ(seqs[k], seqs[k - 1] + 1) << k;
}

TEST_F(LoggerTest, RollingWithRoomForAllFilesKeepsEveryRecord) {
  constexpr int kRecords = 20000;
  auto options = file_options(dir_ / "server.log");
  options.max_size = 32 * 1024;
  options.max_files = 1000;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  for (int i = 0; i < kRecords; ++i) LOG_INFO("seq={}", i);
  Logger::shutdown();
  size_t files = 0;
  size_t records = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    ++files;
    records += read_lines(entry.path()).size();
  }
  EXPECT_GT(files, 10u);  // it did roll
  EXPECT_EQ(records, size_t{kRecords});
}

TEST_F(LoggerTest, FourThreadsHundredThousandRecordsEachAllPresentInOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100000;
  auto options = file_options(dir_ / "server.log");
  options.max_size = 0;
  options.queue_capacity = 4096;
  ASSERT_EQ(test::error_text(Logger::init(options)), "");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) LOG_INFO("t={} i={}", t, i);
    });
  }
  for (auto& thread : threads) thread.join();
  Logger::shutdown();
  std::array<int, kThreads> next{};
  std::ifstream in(dir_ / "server.log");
  size_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto at = line.find("t=");
    ASSERT_NE(at, std::string::npos) << line;
    int t = 0;
    int i = 0;
    ASSERT_EQ(std::sscanf(line.c_str() + at, "t=%d i=%d", &t, &i), 2) << line;
    ASSERT_TRUE(t >= 0 && t < kThreads) << line;
    ASSERT_EQ(i, next[static_cast<size_t>(t)]) << "thread " << t << " out of order";
    ++next[static_cast<size_t>(t)];
  }
  EXPECT_EQ(lines, size_t{kThreads} * kPerThread);
  for (int n : next) EXPECT_EQ(n, kPerThread);
}

// The contract is to stop logging before shutdown(); a thread that does not must still
// neither hang (ERROR waits for its write) nor crash. Its late records go to stderr.
TEST_F(LoggerTest, LoggingDuringShutdownNeitherHangsNorCrashes) {
  for (bool async : {true, false}) {
    auto options = file_options(dir_ / "server.log");
    options.async = async;
    options.queue_capacity = 64;
    ASSERT_EQ(test::error_text(Logger::init(options)), "");
    int saved_stderr = ::dup(STDERR_FILENO);
    int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDERR_FILENO);  // the late records' fallback lines
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&stop, &started, t] {
        started.fetch_add(1);
        for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          if (i % 64 == 0) {
            LOG_ERROR("late error {} {}", t, i);
          } else {
            LOG_INFO("late info {} {}", t, i);
          }
        }
      });
    }
    while (started.load() < 3) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Logger::shutdown();
    stop.store(true);
    for (auto& thread : threads) thread.join();
    ::dup2(saved_stderr, STDERR_FILENO);
    ::close(saved_stderr);
    ::close(null_fd);
    EXPECT_FALSE(read_lines(dir_ / "server.log").empty());
  }
}

// A FIFO nobody reads stalls the background thread's write(), so a small queue fills up
// deterministically; reading the FIFO later lets it finish.
class StalledSinkTest : public LoggerTest {
 protected:
  void SetUp() override {
    fifo_ = dir_ / "fifo.log";
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    reader_fd_ = ::open(fifo_.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(reader_fd_, 0);
  }
  void TearDown() override {
    LoggerTest::TearDown();
    if (reader_.joinable()) reader_.join();
    if (reader_fd_ >= 0) ::close(reader_fd_);
  }
  LogOptions stalled_options(QueueFullPolicy policy) {
    auto options = file_options(fifo_);
    options.max_size = 0;
    options.queue_capacity = 16;
    options.queue_full_policy = policy;
    return options;
  }
  // Reads the FIFO until the logger closes it (at shutdown).
  void start_reading() {
    ::fcntl(reader_fd_, F_SETFL, 0);  // blocking from now on
    reader_ = std::thread([this] {
      char buffer[65536];
      for (;;) {
        ssize_t n = ::read(reader_fd_, buffer, sizeof buffer);
        if (n <= 0) break;
        text_.append(buffer, static_cast<size_t>(n));
      }
    });
  }
  std::vector<std::string> lines_read() {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t end; (end = text_.find('\n', start)) != std::string::npos; start = end + 1) {
      lines.push_back(text_.substr(start, end - start));
    }
    return lines;
  }

  std::string fifo_;
  int reader_fd_ = -1;
  std::thread reader_;
  std::string text_;
};

TEST_F(StalledSinkTest, DropPolicyDropsCountsAndLogsTheCount) {
  constexpr int kRecords = 20000;  // far more than queue + batch buffer + pipe can hold
  uint64_t dropped_before = Logger::dropped();
  ASSERT_EQ(test::error_text(Logger::init(stalled_options(QueueFullPolicy::kDrop))), "");
  for (int i = 0; i < kRecords; ++i) LOG_INFO("drop-test {} padding to make the line longer", i);
  uint64_t dropped = Logger::dropped() - dropped_before;
  EXPECT_GT(dropped, 0u);
  start_reading();
  Logger::shutdown();
  reader_.join();
  auto lines = lines_read();
  EXPECT_EQ(count_containing(lines, "drop-test "), kRecords - dropped);
  EXPECT_GE(count_containing(lines, "log queue full: dropped"), 1u);
  EXPECT_NE(count_containing(lines, "(total " + std::to_string(dropped) + ")"), 0u);
}

TEST_F(StalledSinkTest, BlockPolicyWaitsAndLosesNothing) {
  constexpr int kRecords = 20000;
  uint64_t dropped_before = Logger::dropped();
  ASSERT_EQ(test::error_text(Logger::init(stalled_options(QueueFullPolicy::kBlock))), "");
  std::atomic<int> done{0};
  std::thread producer([&done] {
    for (int i = 0; i < kRecords; ++i) {
      LOG_INFO("block-test {} padding to make the line longer", i);
      done.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // While nobody reads, the producer cannot get far: queue, batch buffer and pipe together
  // hold a few thousand lines. (A pass here cannot be a fluke: a non-blocking logger would
  // finish all 20000 calls during this wait.)
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(done.load(), kRecords);
  start_reading();
  producer.join();
  Logger::shutdown();
  reader_.join();
  EXPECT_EQ(count_containing(lines_read(), "block-test "), size_t{kRecords});
  EXPECT_EQ(Logger::dropped(), dropped_before);
}

using LoggerDeathTest = LoggerTest;

TEST_F(LoggerDeathTest, FatalIsWrittenThenAborts) {
  std::string path = dir_ / "fatal.log";
  EXPECT_DEATH(
      {
        (void)Logger::init(file_options(path));
        LOG_INFO("before fatal");
        LOG_FATAL("fatal-marker {}", 42);
      },
      "");
  auto lines = read_lines(path);  // written by the child before it aborted
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find(" FATAL "), std::string::npos);
  EXPECT_NE(lines[1].find("fatal-marker 42"), std::string::npos);
}

}  // namespace
}  // namespace ucp
