// bin/proactor_test's latency knobs as a process, read back from the kernel: thread names from
// /proc/PID/task/*/comm, each thread's CPUs with sched_getaffinity (server.cpu_affinity, the
// SQPOLL thread's event_loop.sqpoll_cpu), busy polling in the start-up line and serving on both
// backends, and CPUs the process may not use refused as configuration errors (exit 2).

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sched.h>

#include "BackendProbe.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

std::vector<int> cpus_of(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(tid, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// The server's threads by name (several threads of one name: the last one read).
std::map<std::string, pid_t> threads_of(pid_t pid) {
  std::map<std::string, pid_t> threads;
  std::error_code ignored;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(task, ignored)) {
    std::ifstream in(entry.path() / "comm");
    std::string name;
    if (std::getline(in, name)) threads[name] = std::stoi(entry.path().filename().string());
  }
  return threads;
}

// Waits (bounded) until the server has a thread of every name in `names`.
std::map<std::string, pid_t> wait_for_threads(pid_t pid, const std::vector<std::string>& names) {
  std::map<std::string, pid_t> threads;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    threads = threads_of(pid);
    if (std::all_of(names.begin(), names.end(),
                    [&threads](const std::string& n) { return threads.count(n) > 0; })) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return threads;
}

std::string names_of(const std::map<std::string, pid_t>& threads) {
  std::string text;
  for (const auto& [name, tid] : threads) text += name + " ";
  return text;
}

// The child inherits the CPUs this test may use.
std::vector<int> allowed_here() { return cpus_of(0); }

void expect_echo(uint16_t port) {
  auto fd = connect_loopback(port);
  ASSERT_TRUE(fd) << fd.error().message();
  ASSERT_TRUE(send_text(fd->get(), "pinned and polling"));
  char reply[18];
  ASSERT_TRUE(recv_exact(fd->get(), reply));
  EXPECT_EQ(std::string(reply, sizeof reply), "pinned and polling");
}

TEST(LatencyKnobs, ThreadsAreNamedAndAutoPinsWorkerNToTheNthCpu) {
  const std::vector<int> allowed = allowed_here();
  ServerProcess server({"server.thread_num=2", "server.cpu_affinity=auto"});
  UCP_START_SERVER(server);
  const auto threads = wait_for_threads(server.pid(), {"ucp-main", "ucp-worker-0", "ucp-worker-1"});
  ASSERT_EQ(threads.count("ucp-main"), 1u) << names_of(threads);
  ASSERT_EQ(threads.count("ucp-worker-1"), 1u) << names_of(threads);
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-0")), std::vector<int>{allowed[0]});
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-1")), std::vector<int>{allowed[1 % allowed.size()]});
  // The main loop on the CPU after the last worker's (worker 0's when there is none to spare).
  EXPECT_EQ(cpus_of(threads.at("ucp-main")), std::vector<int>{allowed[2 % allowed.size()]});
  EXPECT_EQ(server.count_output_lines("ucp-worker-0..1 (CPUs " + std::to_string(allowed[0]) + "," +
                                      std::to_string(allowed[1 % allowed.size()]) +
                                      "), cpu_affinity=auto"),
            1u)
      << server.output_tail();
  expect_echo(server.port());
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(LatencyKnobs, AListPinsWorkersInOrderAndLeavesTheMainLoopAlone) {
  const std::vector<int> allowed = allowed_here();
  const int first = allowed.back();
  const int second = allowed.front();
  ServerProcess server({"server.thread_num=2", "server.cpu_affinity=" + std::to_string(first) +
                                                   "," + std::to_string(second)});
  UCP_START_SERVER(server);
  const auto threads = wait_for_threads(server.pid(), {"ucp-main", "ucp-worker-0", "ucp-worker-1"});
  ASSERT_EQ(threads.count("ucp-worker-1"), 1u) << names_of(threads);
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-0")), std::vector<int>{first});
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-1")), std::vector<int>{second});
  EXPECT_EQ(cpus_of(threads.at("ucp-main")), allowed);
  expect_echo(server.port());
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(LatencyKnobs, WithoutAffinityThreadsAreNamedAndRunAnywhere) {
  const std::vector<int> allowed = allowed_here();
  ServerProcess server({"server.thread_num=1"});
  UCP_START_SERVER(server);
  const auto threads = wait_for_threads(server.pid(), {"ucp-main", "ucp-worker-0"});
  ASSERT_EQ(threads.count("ucp-worker-0"), 1u) << names_of(threads);
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-0")), allowed);
  EXPECT_EQ(cpus_of(threads.at("ucp-main")), allowed);
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(LatencyKnobs, UdpEchoThreadsAreNamedAndPinnedToo) {
  const std::vector<int> allowed = allowed_here();
  ServerProcess server(
      {"server.protocol=udp_echo", "server.thread_num=1", "server.cpu_affinity=auto"});
  UCP_START_SERVER(server);
  const auto threads = wait_for_threads(server.pid(), {"ucp-main", "ucp-worker-0"});
  ASSERT_EQ(threads.count("ucp-worker-0"), 1u) << names_of(threads);
  EXPECT_EQ(cpus_of(threads.at("ucp-worker-0")), std::vector<int>{allowed[0]});
  EXPECT_EQ(cpus_of(threads.at("ucp-main")), std::vector<int>{allowed[1 % allowed.size()]});
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(LatencyKnobs, TheSqpollThreadRunsOnSqpollCpu) {
  UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(std::string("io_uring"));
  const int cpu = allowed_here().back();
  ServerProcess server({"event_loop.backend=io_uring", "event_loop.sqpoll=true",
                        "event_loop.sqpoll_cpu=" + std::to_string(cpu)});
  UCP_START_SERVER(server);
  if (server.count_output_lines("sqpoll: the kernel refused") > 0) {
    GTEST_SKIP() << "this kernel refuses SQPOLL here:\n" << server.output_tail();
  }
  EXPECT_EQ(server.count_output_lines("sqpoll=on sqpoll_cpu=" + std::to_string(cpu)), 1u)
      << server.output_tail();
  // The kernel names its poller iou-sqp-PID.
  const std::string poller = "iou-sqp-" + std::to_string(server.pid());
  const auto threads = wait_for_threads(server.pid(), {poller});
  ASSERT_EQ(threads.count(poller), 1u) << names_of(threads);
  EXPECT_EQ(cpus_of(threads.at(poller)), std::vector<int>{cpu});
  expect_echo(server.port());
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

class BusyPollProcess : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam()); }
};

TEST_P(BusyPollProcess, IsInTheStartUpLineAndServes) {
  ServerProcess server({"event_loop.backend=" + GetParam(), "event_loop.busy_poll_us=50"});
  UCP_START_SERVER(server);
  EXPECT_EQ(server.count_output_lines("busy_poll_us=50 napi_busy_poll="), 1u)
      << server.output_tail();
  for (int i = 0; i < 20; ++i) expect_echo(server.port());
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

INSTANTIATE_TEST_SUITE_P(Backends, BusyPollProcess, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

TEST(LatencyKnobs, CpusTheProcessMayNotUseAreConfigurationErrors) {
  for (const std::string setting :
       {"server.cpu_affinity=1023", "server.cpu_affinity=0,1023", "event_loop.sqpoll_cpu=1023"}) {
    ServerProcess server({setting});
    if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built";
    ASSERT_TRUE(server.launch()) << server.error();
    const auto status = server.wait_exit(30000);
    ASSERT_TRUE(status) << setting;
    EXPECT_EQ(status->describe(), "exit 2") << setting << "\n" << server.output_tail();
    const std::string key = setting.substr(0, setting.find('='));
    EXPECT_EQ(server.count_output_lines(key + ": CPU 1023 is not one this process may run on"), 1u)
        << server.output_tail();
  }
}

TEST(LatencyKnobs, AMalformedCpuListIsAConfigurationError) {
  ServerProcess server({"server.cpu_affinity=0-x"});
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built";
  ASSERT_TRUE(server.launch()) << server.error();
  const auto status = server.wait_exit(30000);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->describe(), "exit 2") << server.output_tail();
  EXPECT_EQ(server.count_output_lines("server.cpu_affinity: \"x\" is not a CPU number"), 1u)
      << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
