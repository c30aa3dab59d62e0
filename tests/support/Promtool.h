#pragma once
// Promtool: `promtool check metrics` (Debian package prometheus) over a Prometheus text
// exposition, for the tests that check what the library renders.
//
//   if (!test::promtool_installed()) GTEST_SKIP() << test::kPromtoolMissing;
//   const auto [code, said] = test::promtool(text);
//   EXPECT_EQ(code, 0) << said;
//   EXPECT_EQ(said, "");      // no lint warning either
//
// Header-only.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ucp::test {

inline constexpr const char* kPromtoolMissing =
    "promtool is not installed (Debian package prometheus: scripts/install-deps.sh test)";

inline bool promtool_installed() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

/// `promtool check metrics` over `text` (its standard input): its exit code and what it said.
inline std::pair<int, std::string> promtool(const std::string& text) {
  char path[] = "/tmp/ucp-metrics-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return {-1, "mkstemp failed"};
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  std::string output;
  int status = -1;
  if (written) {
    const std::string command = std::string("promtool check metrics <") + path + " 2>&1";
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buffer[512];
      size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
      status = ::pclose(pipe);
    }
  }
  ::unlink(path);
  return {status == -1 ? -1 : WEXITSTATUS(status), output};
}

}  // namespace ucp::test
