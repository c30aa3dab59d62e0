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
// epoll half still runs (BackendProbe.h).

#include <cstdlib>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ucp/io/EventLoop.h"

#include "BackendProbe.h"

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

inline std::string backend_name(const ::testing::TestParamInfo<BackendKind>& info) {
  return backend_label(info.param);
}

/// The backend of a test binary that ctest runs once per backend (ucp_add_test BOTH_BACKENDS):
/// UCP_TEST_BACKEND=epoll or io_uring; unset (the first run) means auto, which is io_uring
/// wherever io_uring can run. Loops made with LoopRunner's make_loop use it.
inline BackendKind backend_under_test() {
  const char* name = std::getenv("UCP_TEST_BACKEND");
  if (name == nullptr) return BackendKind::kAuto;
  if (std::string_view(name) == "epoll") return BackendKind::kEpoll;
  if (std::string_view(name) == "io_uring") return BackendKind::kIoUring;
  return BackendKind::kAuto;
}

/// Empty when `kind` can run here; otherwise why not.
inline std::string backend_unusable(BackendKind kind) {
  return kind == BackendKind::kIoUring ? io_uring_unusable() : std::string();
}

}  // namespace ucp::test

/// In a test body: skips the test when its backend cannot run on this host.
#define UCP_SKIP_UNLESS_BACKEND_USABLE(kind)                              \
  do {                                                                    \
    const std::string ucp_unusable = ::ucp::test::backend_unusable(kind); \
    if (!ucp_unusable.empty()) GTEST_SKIP() << ucp_unusable;              \
  } while (0)
