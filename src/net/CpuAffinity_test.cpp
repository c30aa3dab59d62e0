// CpuAffinity: the server.cpu_affinity syntax, the placement rule, and a pool's workers named
// and pinned as it says, read back from the kernel (sched_getaffinity, /proc/self/task).

#include "ucp/net/CpuAffinity.h"

#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ucp/net/EventLoopThreadPool.h"

namespace ucp {
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

std::string name_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

pid_t this_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

TEST(CpuAffinity, ParsesNothingAutoAndLists) {
  auto none = CpuAffinity::parse("  ");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->mode, CpuAffinity::Mode::kNone);
  EXPECT_FALSE(none->pinned());
  EXPECT_EQ(none->to_string(), "");

  auto automatic = CpuAffinity::parse("auto");
  ASSERT_TRUE(automatic);
  EXPECT_EQ(automatic->mode, CpuAffinity::Mode::kAuto);
  EXPECT_EQ(automatic->to_string(), "auto");

  auto list = CpuAffinity::parse(" 3, 1 ,4-6,0 ");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->mode, CpuAffinity::Mode::kList);
  EXPECT_EQ(list->cpus, (std::vector<int>{3, 1, 4, 5, 6, 0}));
  EXPECT_EQ(list->to_string(), "3,1,4,5,6,0");
}

TEST(CpuAffinity, RefusesWhatIsNotACpuList) {
  for (const char* bad :
       {"x", "1,", ",1", "1,,2", "-1", "6-4", "1-", "2.5", "1024", "99999999", "auto,1", "0x1"}) {
    auto parsed = CpuAffinity::parse(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_NE(parsed.error().message.find("expected auto"), std::string::npos)
        << parsed.error().message;
  }
  EXPECT_NE(CpuAffinity::parse("6-4").error().message.find("\"6-4\" is an empty range"),
            std::string::npos);
}

TEST(CpuAffinity, AutoSpreadsWorkersOverTheAllowedCpusAndPutsTheMainLoopNext) {
  const CpuAffinity automatic = *CpuAffinity::parse("auto");
  const std::vector<int> allowed = {1, 3, 5};  // a process started with taskset -c 1,3,5
  EXPECT_EQ(automatic.worker_cpu(0, allowed), 1);
  EXPECT_EQ(automatic.worker_cpu(1, allowed), 3);
  EXPECT_EQ(automatic.worker_cpu(2, allowed), 5);
  EXPECT_EQ(automatic.worker_cpu(3, allowed), 1);
  EXPECT_EQ(automatic.main_cpu(2, allowed), 5);  // a CPU to spare: its own
  EXPECT_EQ(automatic.main_cpu(3, allowed), 1);  // none: worker 0's
  EXPECT_EQ(automatic.main_cpu(4, allowed), 3);
}

TEST(CpuAffinity, AListGivesWorkersItsCpusInOrderAndLeavesTheMainLoopUnpinned) {
  const CpuAffinity list = *CpuAffinity::parse("6,2");
  EXPECT_EQ(list.worker_cpu(0, {0, 1}), 6);
  EXPECT_EQ(list.worker_cpu(1, {0, 1}), 2);
  EXPECT_EQ(list.worker_cpu(2, {0, 1}), 6);
  EXPECT_EQ(list.main_cpu(2, {0, 1}), -1);
  const CpuAffinity none;
  EXPECT_EQ(none.worker_cpu(0, {0, 1}), -1);
  EXPECT_EQ(none.main_cpu(1, {0, 1}), -1);
}

TEST(CpuAffinity, FormatsCpuListsAsTheKernelDoes) {
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(format_cpu_list({1, 3}), "1,3");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(CpuAffinity, PinsAndNamesTheCallingThread) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  std::thread thread([&] {
    name_current_thread("ucp-test-a-name-longer-than-15");
    EXPECT_EQ(name_of(this_tid()), "ucp-test-a-name");
    ASSERT_TRUE(pin_current_thread(allowed.back()));
    EXPECT_EQ(cpus_of(this_tid()), std::vector<int>{allowed.back()});
    EXPECT_EQ(allowed_cpus(), std::vector<int>{allowed.back()});
    EXPECT_FALSE(pin_current_thread(CPU_SETSIZE));
  });
  thread.join();
}

// Each worker, asked on its own thread: its name and the CPUs the kernel lets it run on.
struct Seen {
  std::string name;
  std::vector<int> cpus;
};

std::vector<Seen> look_at_workers(EventLoopThreadPool& pool) {
  std::vector<Seen> seen;
  for (const auto& loop : pool.loops()) {
    std::promise<Seen> answer;
    loop->post([&answer] { answer.set_value({name_of(this_tid()), cpus_of(this_tid())}); });
    auto future = answer.get_future();
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return {};
    seen.push_back(future.get());
  }
  return seen;
}

TEST(CpuAffinity, APoolNamesItsWorkersAndPinsThemAutomatically) {
  const std::vector<int> allowed = allowed_cpus();
  EventLoopThreadPool pool(3, LoopOptions{}, nullptr, *CpuAffinity::parse("auto"));
  ASSERT_TRUE(pool.start(nullptr));
  const std::vector<Seen> seen = look_at_workers(pool);
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].name, "ucp-worker-" + std::to_string(i));
    EXPECT_EQ(seen[i].cpus, std::vector<int>{allowed[i % allowed.size()]});
    EXPECT_EQ(pool.worker_cpu(i), allowed[i % allowed.size()]);
  }
  EXPECT_EQ(pool.main_cpu(), allowed[3 % allowed.size()]);
  EXPECT_NE(pool.describe_placement().find("cpu_affinity=auto"), std::string::npos)
      << pool.describe_placement();
  // The main loop's thread: named and pinned by the same rule.
  std::thread main([&] {
    pool.place_main_thread();
    EXPECT_EQ(name_of(this_tid()), "ucp-main");
    EXPECT_EQ(cpus_of(this_tid()), std::vector<int>{pool.main_cpu()});
  });
  main.join();
  pool.stop_all();
  pool.join();
}

TEST(CpuAffinity, APoolWithoutAffinityNamesItsWorkersAndLeavesTheirCpus) {
  const std::vector<int> allowed = allowed_cpus();
  EventLoopThreadPool pool(2, LoopOptions{});
  ASSERT_TRUE(pool.start(nullptr));
  const std::vector<Seen> seen = look_at_workers(pool);
  ASSERT_EQ(seen.size(), 2u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].name, "ucp-worker-" + std::to_string(i));
    EXPECT_EQ(seen[i].cpus, allowed);
  }
  EXPECT_EQ(pool.main_cpu(), -1);
  pool.stop_all();
  pool.join();
}

TEST(CpuAffinity, APoolRefusesToStartOnACpuTheProcessMayNotUse) {
  EventLoopThreadPool pool(1, LoopOptions{}, nullptr, *CpuAffinity::parse("1023"));
  auto started = pool.start(nullptr);
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("cannot run on CPU 1023 (server.cpu_affinity = 1023)"),
            std::string::npos)
      << started.error().message;
}

}  // namespace
}  // namespace ucp
