// bin/proactor_test at start-up, on io_uring and on epoll: the listening socket accepts
// connections only once every worker loop exists and can serve them. Before, the socket
// listened while the workers were still being set up (seconds with the seed's config on a
// small machine), and the kernel completed handshakes nobody served meanwhile.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "BackendProbe.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

/// A port no socket uses right now (the kernel's choice for a bind to port 0).
uint16_t free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return 0;
  socklen_t length = sizeof address;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

/// Whether a TCP socket is in LISTEN on 127.0.0.1:`port` (/proc/net/tcp, state 0A).
bool listening_on(uint16_t port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  char wanted[32];
  std::snprintf(wanted, sizeof wanted, "0100007F:%04X", port);
  while (std::getline(table, line)) {
    if (line.find(wanted) == std::string::npos) continue;
    // "  sl  local_address rem_address   st ..."
    const size_t local = line.find(wanted);
    const size_t state = line.find(' ', line.find(' ', local) + 1);
    if (state != std::string::npos && line.compare(state + 1, 2, "0A") == 0) return true;
  }
  return false;
}

class StartupOrder : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ::signal(SIGPIPE, SIG_IGN);
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, StartupOrder, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

TEST_P(StartupOrder, ListensOnlyOnceEveryWorkerCanServe) {
  constexpr int kWorkers = 32;
  const uint16_t port = free_port();
  ASSERT_NE(port, 0);
  ServerProcess server(std::vector<std::string>{
      "server.port=" + std::to_string(port), "server.thread_num=" + std::to_string(kWorkers),
      "event_loop.ring_entries=32768", "event_loop.backend=" + GetParam()});
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built: " UCP_BIN_DIR;
  ASSERT_TRUE(server.launch()) << server.error();
  // The first moment the port listens: how many threads the process has then (main, logger,
  // the start-up signal reader, and the workers once they exist).
  int64_t threads_when_listening = -1;
  for (int i = 0; i < 30000 && server.alive(); ++i) {
    if (listening_on(port)) {
      threads_when_listening = server.thread_count();
      break;
    }
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_GE(threads_when_listening, 0) << "the port never listened:\n" << server.output_tail();
  std::printf("[ figure   ] threads when the port began to listen: %lld (workers: %d)\n",
              static_cast<long long>(threads_when_listening), kWorkers);
  EXPECT_GT(threads_when_listening, kWorkers) << server.output_tail();
  // A client that connects as soon as it can is served.
  auto fd = connect_loopback(port);
  ASSERT_TRUE(fd) << fd.error().message();
  const std::string message = "first echo";
  std::string scratch(message.size(), '\0');
  auto echoed = echo_round_trip(fd->get(), message, scratch, 30000);
  EXPECT_TRUE(echoed) << echoed.error().message() << "\n" << server.output_tail();
  fd->reset();
  for (int i = 0; i < 3000 && server.count_output_lines("listening on") == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server.count_output_lines("listening on"), 1u) << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
