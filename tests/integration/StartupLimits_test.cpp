// bin/proactor_test at start-up, against limits of the machine and the process: settings
// whose memory the machine cannot have are refused when the config is loaded (exit 2, with
// the figure), an allocation that fails at start is exit 1 with one line naming the key
// (never an uncaught exception, SIGABRT), a config path that is not a regular file is
// refused, and SIGTERM while the workers start ends the process at once.
//
// Address-space limits (RLIMIT_AS, as `prlimit --as=3G` sets) cannot work under ASan or
// TSan, which reserve terabytes of address space at start: those tests skip there, and the
// release run exercises them.

#include <csignal>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "ServerProcess.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UCP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UCP_SANITIZED 1
#endif
#endif

namespace ucp::test {
namespace {

constexpr rlim_t kGiB = rlim_t{1} << 30;
constexpr int64_t kExitTimeoutMs = 30000;  // bound on every wait for an exit

#ifdef UCP_SANITIZED
#define UCP_SKIP_UNDER_SANITIZERS()                                                           \
  GTEST_SKIP() << "RLIMIT_AS cannot work under ASan/TSan (they reserve terabytes of address " \
                  "space)"
#else
#define UCP_SKIP_UNDER_SANITIZERS() \
  do {                              \
  } while (0)
#endif

/// Runs the server to its exit. The child must end by itself: a start-up that hangs or a
/// crash fails the test.
class RunToExit {
 public:
  explicit RunToExit(ServerProcess::Options options) : server_(std::move(options)) {}

  ::testing::AssertionResult exits_with(int code, const std::string& needle) {
    if (!server_.binary_exists()) return ::testing::AssertionFailure() << "binary missing";
    if (!server_.launch()) return ::testing::AssertionFailure() << server_.error();
    auto status = server_.wait_exit(kExitTimeoutMs);
    if (!status) {
      server_.stop(SIGKILL, 5000);
      return ::testing::AssertionFailure() << "still running after " << kExitTimeoutMs << " ms:\n"
                                           << server_.output_tail();
    }
    const std::string output = server_.output();
    if (!status->exited || status->code != code) {
      return ::testing::AssertionFailure()
             << status->describe() << ", expected exit " << code << ":\n"
             << server_.output_tail();
    }
    if (output.find("terminate called") != std::string::npos) {
      return ::testing::AssertionFailure() << "an uncaught exception:\n" << server_.output_tail();
    }
    if (output.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "no line naming \"" << needle << "\":\n"
                                           << server_.output_tail();
    }
    return ::testing::AssertionSuccess() << server_.output_tail(600);
  }

  ServerProcess& server() { return server_; }

 private:
  ServerProcess server_;
};

ServerProcess::Options with(std::vector<std::string> overrides, rlim_t address_space = 0) {
  ServerProcess::Options options;
  options.overrides = std::move(overrides);
  options.address_space_limit = address_space;
  return options;
}

TEST(StartupLimits, BufferMemoryBeyondAnyMachineIsRefusedWhenTheConfigLoads) {
  // 1,024 workers x 32,768 x 1 MiB provided buffers: 32 TiB.
  RunToExit run(with({"server.thread_num=1024", "event_loop.provided_buffers_count=32768",
                      "event_loop.provided_buffer_size=1048576"}));
  auto result = run.exits_with(2, "event_loop.provided_buffer");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
}

TEST(StartupLimits, ProvidedBuffersOverTheAddressSpaceLimitExitOneNamingTheKey) {
  UCP_SKIP_UNDER_SANITIZERS();
  // 4,096 x 1 MiB = 4 GiB of provided buffers for the worker, under a 3 GiB address space.
  RunToExit run(with({"event_loop.provided_buffer_size=1048576"}, 3 * kGiB));
  auto result = run.exits_with(1, "event_loop.provided_buffer");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
}

TEST(StartupLimits, WorkersOverTheAddressSpaceLimitExitOneNamingTheKey) {
  UCP_SKIP_UNDER_SANITIZERS();
  // Small buffers, so the configuration fits any machine; 1,000 threads' stacks alone pass
  // 3 GiB, so some worker cannot start.
  RunToExit run(with({"server.thread_num=1000", "event_loop.provided_buffers_count=64",
                      "event_loop.ring_entries=256"},
                     3 * kGiB));
  auto result = run.exits_with(1, "server.thread_num");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
}

TEST(StartupLimits, LogQueueOverTheAddressSpaceLimitExitsOneNamingTheKey) {
  UCP_SKIP_UNDER_SANITIZERS();
  // 16,777,216 records x 256 bytes = 4 GiB of log queue under a 3 GiB address space.
  RunToExit run(with({"log.queue_capacity=16777216"}, 3 * kGiB));
  auto result = run.exits_with(1, "log.queue_capacity");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
}

TEST(StartupLimits, ConfigPathThatIsNotARegularFileIsRefused) {
  UCP_SKIP_UNDER_SANITIZERS();  // the memory limit makes an unbounded read fail fast
  ServerProcess::Options options = with({}, 1 * kGiB);
  options.config_path = "/dev/zero";
  RunToExit run(options);
  auto result = run.exits_with(2, "/dev/zero: not a regular file");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
}

TEST(StartupLimits, ConfigFifoIsRefusedWithoutWaitingForAWriter) {
  char dir_template[] = "/tmp/ucp-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string fifo = std::string(dir_template) + "/ucp.conf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ServerProcess::Options options;
  options.config_path = fifo;
  RunToExit run(options);
  auto result = run.exits_with(2, fifo + ": not a regular file");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
  ::unlink(fifo.c_str());
  ::rmdir(dir_template);
}

TEST(StartupLimits, ConfigFileLargerThanOneMebibyteIsRefused) {
  char dir_template[] = "/tmp/ucp-big-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/ucp.conf";
  {
    std::ofstream out(path);
    const std::string comment = "# " + std::string(1000, 'x') + "\n";
    for (int i = 0; i < 1100; ++i) out << comment;  // 1.1 MB of comments: valid, but too big
  }
  ServerProcess::Options options;
  options.config_path = path;
  RunToExit run(options);
  auto result = run.exits_with(2, "larger than");
  EXPECT_TRUE(result);
  std::printf("[ output   ] %s\n", result.message());
  ::unlink(path.c_str());
  ::rmdir(dir_template);
}

// SIGTERM while 512 worker loops are being created (a few seconds on a small machine): the
// process exits 0 at once instead of finishing the start-up first, and never starts serving.
TEST(StartupLimits, SigtermWhileWorkersStartEndsTheProcessAtOnce) {
  ServerProcess server(with({"server.thread_num=512", "event_loop.provided_buffers_count=64"}));
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built: " UCP_BIN_DIR;
  ASSERT_TRUE(server.launch()) << server.error();
  // Workers are starting once the process has more threads than main + logger.
  bool starting = false;
  for (int i = 0; i < 10000 && server.alive() && !starting; ++i) {
    starting = server.thread_count() >= 8;
    if (!starting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(starting) << "the workers never started:\n" << server.output_tail();
  const int64_t threads_at_signal = server.thread_count();
  server.send_signal(SIGTERM);
  auto status = server.wait_exit(kExitTimeoutMs);
  ASSERT_TRUE(status) << "still running " << kExitTimeoutMs << " ms after SIGTERM";
  std::printf("[ figure   ] threads_at_sigterm = %lld\n",
              static_cast<long long>(threads_at_signal));
  EXPECT_TRUE(status->clean()) << status->describe() << "\n" << server.output_tail();
  EXPECT_EQ(server.count_output_lines("listening on"), 0u)
      << "the start-up ran to the end before the signal was handled:\n"
      << server.output_tail();
  EXPECT_EQ(server.count_output_lines("during start-up"), 1u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
