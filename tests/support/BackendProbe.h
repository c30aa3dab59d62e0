#pragma once
// BackendProbe: whether io_uring can be used where the tests run, asked of the kernel with the
// raw io_uring_setup(2) call. A container's seccomp profile or sysctl kernel.io_uring_disabled
// refuses it; the io_uring half of a test that runs on both backends then skips with the
// reason. Header-only, without any UCP library (the integration tests link none).
//
//   class Suite : public ::testing::TestWithParam<std::string> {  // "io_uring" or "epoll"
//     void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }
//   };

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ucp::test {

/// Empty when io_uring works here; otherwise why not. Probed once.
inline std::string io_uring_unusable() {
  static const std::string reason = [] {
    io_uring_params params{};
    const long fd = ::syscall(__NR_io_uring_setup, 2, &params);
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
      return std::string();
    }
    return std::string("io_uring is not available here: ") + std::strerror(errno);
  }();
  return reason;
}

/// The backends by their config names (event_loop.backend), for tests of bin/proactor_test.
inline const auto kBackendNames = ::testing::Values(std::string("io_uring"), std::string("epoll"));

}  // namespace ucp::test

/// In a test body or SetUp: skips when the backend named `name` cannot run here.
#define UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(name)                           \
  do {                                                                       \
    if ((name) == "io_uring" && !::ucp::test::io_uring_unusable().empty()) { \
      GTEST_SKIP() << ::ucp::test::io_uring_unusable();                      \
    }                                                                        \
  } while (0)
