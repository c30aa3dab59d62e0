#include "LogFile.h"

#include <ctime>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "LogTestUtil.h"
#include "RecordFormatter.h"

namespace ucp::detail {
namespace {

using test::exists;
using test::read_lines;
using test::TempDir;

std::string numbered_line(int i) { return "line " + std::to_string(i) + " xxxxxxxxxxxxxxxxx\n"; }

TEST(LogFile, CreatesMissingDirectories) {
  TempDir dir;
  std::string error;
  auto file = LogFile::open(dir / "a/b/c/server.log", 0, 3, error);
  ASSERT_TRUE(file) << error;
  file->append("hello\n");
  file.reset();
  EXPECT_EQ(read_lines(dir / "a/b/c/server.log"), std::vector<std::string>{"hello"});
}

TEST(LogFile, PathUnderARegularFileIsAnErrorLine) {
  TempDir dir;
  { std::ofstream(dir / "blocker") << "x"; }
  std::string error;
  auto file = LogFile::open(dir / "blocker/logs/server.log", 0, 3, error);
  EXPECT_FALSE(file);
  EXPECT_NE(error.find("cannot create log directory"), std::string::npos) << error;
  EXPECT_NE(error.find("blocker"), std::string::npos) << error;
}

TEST(LogFile, DirectoryAsFileIsAnErrorLine) {
  TempDir dir;
  std::filesystem::create_directory(dir / "server.log");
  std::string error;
  EXPECT_FALSE(LogFile::open(dir / "server.log", 0, 3, error));
  EXPECT_NE(error.find("cannot open log file"), std::string::npos) << error;
}

TEST(LogFile, AppendsToAnExistingFile) {
  TempDir dir;
  { std::ofstream(dir / "server.log") << "old\n"; }
  std::string error;
  auto file = LogFile::open(dir / "server.log", 0, 3, error);
  ASSERT_TRUE(file) << error;
  file->append("new\n");
  file.reset();
  EXPECT_EQ(read_lines(dir / "server.log"), (std::vector<std::string>{"old", "new"}));
}

// Size rolling: exactly max_files rolled files, each under max_size, lines never split,
// and the kept files hold the newest lines in order with none missing.
TEST(LogFile, RollsBySizeKeepingExactlyMaxFilesAndWholeLines) {
  TempDir dir;
  std::string error;
  constexpr uint64_t kMaxSize = 1000;
  constexpr int kLines = 1000;
  auto file = LogFile::open(dir / "server.log", kMaxSize, 3, error);
  ASSERT_TRUE(file) << error;
  for (int i = 0; i < kLines; ++i) file->append(numbered_line(i));
  file.reset();
  EXPECT_TRUE(exists(dir / "server.log.3"));
  EXPECT_FALSE(exists(dir / "server.log.4"));
  std::vector<std::string> kept;
  for (std::string name : {"server.log.3", "server.log.2", "server.log.1", "server.log"}) {
    EXPECT_LE(std::filesystem::file_size(dir / name), kMaxSize) << name;
    for (auto& line : read_lines(dir / name)) kept.push_back(line + "\n");
  }
  ASSERT_FALSE(kept.empty());
  int first = kLines - static_cast<int>(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) {
    ASSERT_EQ(kept[k], numbered_line(first + static_cast<int>(k))) << k;
  }
}

TEST(LogFile, RollOnRequestShiftsFiles) {
  TempDir dir;
  std::string error;
  auto file = LogFile::open(dir / "server.log", 0, 2, error);
  ASSERT_TRUE(file) << error;
  for (int day = 0; day < 4; ++day) {
    file->append(numbered_line(day));
    file->roll();
  }
  file->append(numbered_line(4));
  file.reset();
  EXPECT_EQ(read_lines(dir / "server.log"), std::vector<std::string>{"line 4 xxxxxxxxxxxxxxxxx"});
  EXPECT_EQ(read_lines(dir / "server.log.1"), std::vector<std::string>{"line 3 xxxxxxxxxxxxxxxxx"});
  EXPECT_EQ(read_lines(dir / "server.log.2"), std::vector<std::string>{"line 2 xxxxxxxxxxxxxxxxx"});
  EXPECT_FALSE(exists(dir / "server.log.3"));
}

TEST(LogFile, DailyRollHappensOnceWhenTheDayAdvances) {
  TempDir dir;
  std::string error;
  auto file = LogFile::open(dir / "server.log", 0, 5, error);
  ASSERT_TRUE(file) << error;
  int64_t now_ns = static_cast<int64_t>(std::time(nullptr)) * 1000000000;
  int32_t today = RecordFormatter::day_of(now_ns);
  int32_t tomorrow = RecordFormatter::day_of(now_ns + int64_t{26} * 3600 * 1000000000);
  ASSERT_GT(tomorrow, today);
  file->roll_if_later_day(today);
  file->append("today\n");
  file->roll_if_later_day(tomorrow);
  file->append("tomorrow 1\n");
  file->roll_if_later_day(today);  // a late record from before midnight: no second roll
  file->roll_if_later_day(tomorrow);
  file->append("tomorrow 2\n");
  file.reset();
  EXPECT_EQ(read_lines(dir / "server.log.1"), std::vector<std::string>{"today"});
  EXPECT_EQ(read_lines(dir / "server.log"), (std::vector<std::string>{"tomorrow 1", "tomorrow 2"}));
  EXPECT_FALSE(exists(dir / "server.log.2"));
}

TEST(RecordFormatter, DayOfAdvancesAcrossYearEnd) {
  // 2026-12-31 12:00 and 2027-01-01 12:00 UTC are on different local days in every zone.
  int64_t dec31 = int64_t{1798718400} * 1000000000;
  int64_t jan1 = dec31 + int64_t{86400} * 1000000000;
  EXPECT_LT(RecordFormatter::day_of(dec31), RecordFormatter::day_of(jan1));
}

TEST(LogFile, ZeroMaxFilesKeepsOnlyTheLiveFile) {
  TempDir dir;
  std::string error;
  auto file = LogFile::open(dir / "server.log", 100, 0, error);
  ASSERT_TRUE(file) << error;
  for (int i = 0; i < 50; ++i) file->append(numbered_line(i));
  file.reset();
  EXPECT_FALSE(exists(dir / "server.log.1"));
  EXPECT_LE(std::filesystem::file_size(dir / "server.log"), 100u);
}

TEST(LogFile, LineLongerThanMaxSizeGetsAFileOfItsOwn) {
  TempDir dir;
  std::string error;
  auto file = LogFile::open(dir / "server.log", 10, 5, error);
  ASSERT_TRUE(file) << error;
  file->append("short\n");
  file->append(std::string(50, 'x') + "\n");
  file->append("after\n");
  file.reset();
  EXPECT_EQ(read_lines(dir / "server.log.2"), std::vector<std::string>{"short"});
  EXPECT_EQ(read_lines(dir / "server.log.1"), std::vector<std::string>{std::string(50, 'x')});
  EXPECT_EQ(read_lines(dir / "server.log"), std::vector<std::string>{"after"});
}

}  // namespace
}  // namespace ucp::detail
