#pragma once
// Backends: the event loop backends a test runs on, as a GoogleTest parameter, so that one
// test body covers io_uring and epoll alike.
//
//   class MyTest : public ::testing::TestWithParam<ucp::BackendKind> {};
//   TEST_P(MyTest, Works) {
//     UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam());
//     LoopOptions options;
//     options.backend = GetParam();
//     ...
//   }
//   INSTANTIATE_TEST_SUITE_P(Backends, MyTest, ucp::test::kAllBackends, ucp::test::backend_name);
//
// io_uring may be blocked where the suite runs (a container's seccomp profile, sysctl
// kernel.io_uring_disabled): its half then skips with the reason instead of failing, and the
// epoll half still runs. Header-only, without any ucp library (the integration tests link
// none), so the probe is the raw system call.

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ucp/io/EventLoop.h"

namespace ucp::test {

inline const auto kAllBackends = ::testing::Values(BackendKind::kIoUring, BackendKind::kEpoll);

inline const char* backend_label(BackendKind kind) {
  switch (kind) {
    case BackendKind::kIoUring:
      return "io_uring";
    case BackendKind::kEpoll:
      return "epoll";
    case BackendKind::kAuto:
      break;
  }
  return "auto";
}

/// The config override that selects `kind` in bin/proactor_test.
inline std::string backend_override(BackendKind kind) {
  return std::string("event_loop.backend=") + backend_label(kind);
}

inline std::string backend_name(const ::testing::TestParamInfo<BackendKind>& info) {
  return backend_label(info.param);
}

/// Empty when `kind` can run here; otherwise why not.
inline std::string backend_unusable(BackendKind kind) {
  if (kind != BackendKind::kIoUring) return {};
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

}  // namespace ucp::test

/// In a test body: skips the test when its backend cannot run on this host.
#define UCP_SKIP_UNLESS_BACKEND_USABLE(kind)                              \
  do {                                                                    \
    const std::string ucp_unusable = ::ucp::test::backend_unusable(kind); \
    if (!ucp_unusable.empty()) GTEST_SKIP() << ucp_unusable;              \
  } while (0)
