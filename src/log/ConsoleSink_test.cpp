#include "ConsoleSink.h"

#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "RecordFormatter.h"

namespace ucp::detail {
namespace {

std::string sample_line(LogLevel level) {
  RecordFormatter formatter;
  fmt::memory_buffer line;
  formatter.format(int64_t{1790000000} * 1000000000, level, 42, "/src/net/Server.cpp", 7, "hi",
                   line);
  return std::string(line.data(), line.size());
}

std::string read_available(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

TEST(ConsoleSink, WritesPlainTextWhenNotATerminal) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK), 0);
  auto line = sample_line(LogLevel::kWarn);
  {
    ConsoleSink sink(fds[1], RecordFormatter().level_offset(), false);
    sink.append(line, LogLevel::kWarn);
    EXPECT_TRUE(sink.has_buffered());
    sink.flush();
  }
  EXPECT_EQ(read_available(fds[0]), line);
  EXPECT_NE(line.find(" WARN  42 Server.cpp:7 hi\n"), std::string::npos) << line;
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(ConsoleSink, ColoursOnlyTheLevelOnATerminal) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    GTEST_SKIP() << "no pseudo-terminal available";
  }
  int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  auto line = sample_line(LogLevel::kError);
  {
    ConsoleSink sink(terminal, RecordFormatter().level_offset(), false);
    sink.append(line, LogLevel::kError);
  }  // the destructor flushes
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  auto shown = read_available(master);
  auto level = line.find("ERROR");
  ASSERT_NE(level, std::string::npos);
  // The terminal may turn "\n" into "\r\n"; compare what comes before it.
  std::string expected = line.substr(0, level) + "\033[31mERROR\033[0m" +
                         line.substr(level + 5, line.size() - level - 6);
  EXPECT_EQ(shown.substr(0, expected.size()), expected);
  ::close(terminal);
  ::close(master);
}

// Under systemd's journal each line starts with its syslog priority, and nothing is coloured.
TEST(ConsoleSink, PrefixesEachLineWithItsPriorityForTheJournal) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK), 0);
  const auto warn = sample_line(LogLevel::kWarn);
  const auto debug = sample_line(LogLevel::kDebug);
  const auto fatal = sample_line(LogLevel::kFatal);
  {
    ConsoleSink sink(fds[1], RecordFormatter().level_offset(), true);
    sink.append(warn, LogLevel::kWarn);
    sink.append(debug, LogLevel::kDebug);
    sink.append(fatal, LogLevel::kFatal);
  }
  EXPECT_EQ(read_available(fds[0]), "<4>" + warn + "<7>" + debug + "<2>" + fatal);
  ::close(fds[0]);
  ::close(fds[1]);
}

// JOURNAL_STREAM names the journal's socket by device and inode: only when that is stdout are
// the lines going to the journal.
TEST(ConsoleSink, RecognisesTheJournalByStdoutsDeviceAndInode) {
  struct stat out {};
  ASSERT_EQ(::fstat(STDOUT_FILENO, &out), 0);
  const char* saved = std::getenv("JOURNAL_STREAM");
  const std::string before = saved != nullptr ? saved : "";
  ::unsetenv("JOURNAL_STREAM");
  EXPECT_FALSE(stdout_is_journal());
  const std::string mine = std::to_string(out.st_dev) + ":" + std::to_string(out.st_ino);
  ::setenv("JOURNAL_STREAM", mine.c_str(), 1);
  EXPECT_TRUE(stdout_is_journal());
  const std::string other = std::to_string(out.st_dev) + ":" + std::to_string(out.st_ino + 1);
  ::setenv("JOURNAL_STREAM", other.c_str(), 1);
  EXPECT_FALSE(stdout_is_journal()) << "stdout redirected elsewhere by the service";
  if (saved != nullptr) {
    ::setenv("JOURNAL_STREAM", before.c_str(), 1);
  } else {
    ::unsetenv("JOURNAL_STREAM");
  }
}

}  // namespace
}  // namespace ucp::detail
