// bin/proactor_test where io_uring is blocked, as in a container with the default seccomp
// profile: the server runs under a seccomp filter that makes io_uring_setup fail
// (tests/support/SeccompFilter.h). `event_loop.backend = auto` must serve on epoll and say so in
// one WARN line that names seccomp and the way back; `io_uring` must exit 1 with a line that
// says why. And epoll chosen on purpose warns once about each io_uring-only option.

#include <cerrno>
#include <csignal>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

::testing::AssertionResult echoes(uint16_t port) {
  auto fd = connect_loopback(port);
  if (!fd) return ::testing::AssertionFailure() << "connect: " << fd.error().message();
  std::vector<char> out(4096), in(4096);
  fill_pattern(out, 7);
  if (auto done = echo_round_trip(fd->get(), out, in, 10000); !done) {
    return ::testing::AssertionFailure() << "round trip: " << done.error().message();
  }
  return ::testing::AssertionSuccess();
}

class BackendFallback : public ::testing::TestWithParam<int> {  // the filter's errno
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

INSTANTIATE_TEST_SUITE_P(Seccomp, BackendFallback, ::testing::Values(EPERM, ENOSYS),
                         [](const auto& param_info) {
                           return std::string(param_info.param == EPERM ? "eperm" : "enosys");
                         });

TEST_P(BackendFallback, AutoServesOnEpollAndWarnsOnceNamingSeccomp) {
  ServerProcess::Options options;
  options.block_io_uring = GetParam();
  options.overrides = {"event_loop.backend=auto", "server.thread_num=2"};
  ServerProcess server(options);
  UCP_START_SERVER(server);
  EXPECT_TRUE(echoes(server.port()));
  EXPECT_TRUE(echoes(server.port()));  // the second worker too
  // One line for the main loop and both workers, naming the cause and the way back.
  EXPECT_EQ(server.count_output_lines("running on epoll instead"), 1u) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("seccomp"), 1u) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("WARN"), 1u) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("deploy/seccomp-io_uring.json"), 1u);
  EXPECT_EQ(server.count_output_lines("2 worker loop(s), epoll: edge_triggered=on"), 1u)
      << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST_P(BackendFallback, IoUringOnlyExitsOneWithTheReason) {
  ServerProcess::Options options;
  options.block_io_uring = GetParam();
  options.overrides = {"event_loop.backend=io_uring"};
  options.start_timeout_ms = 5000;
  ServerProcess server(options);
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built";
  ASSERT_FALSE(server.start()) << "the server started without io_uring";
  auto status = server.wait_exit(5000);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->describe(), "exit 1") << server.output_tail();
  EXPECT_GE(server.count_output_lines("proactor_test: io_uring is blocked by a seccomp filter"), 1u)
      << server.output_tail();
  EXPECT_GE(server.count_output_lines("event_loop.backend = auto"), 1u) << server.output_tail();
}

// Chosen on purpose, with every io_uring-only option on: one WARN each, then it serves.
TEST(BackendEpoll, IoUringOnlyOptionsWarnOnceEachAndTheServerRuns) {
  ServerProcess server({"event_loop.backend=epoll", "event_loop.sqpoll=true",
                        "event_loop.registered_buffers_count=16",
                        "event_loop.msg_ring_handoff=true", "server.thread_num=2"});
  UCP_START_SERVER(server);
  EXPECT_TRUE(echoes(server.port()));
  EXPECT_EQ(server.count_output_lines("sqpoll: io_uring only"), 1u) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("registered_buffers_count: io_uring only"), 1u);
  EXPECT_EQ(server.count_output_lines("msg_ring_handoff: the epoll backend"), 1u)
      << server.output_tail();
  EXPECT_EQ(server.count_output_lines("WARN"), 3u) << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
