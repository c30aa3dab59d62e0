// SIGHUP and a program's reload hook (ucp::app::Application::on_reload): tests/programs/
// reload_probe answers GET / with its [probe] word, a key declared reloadable. A new word is
// applied while the server runs; a word the hook refuses, or a file that no longer loads,
// leaves the running one, with one ERROR line; a key that is not reloadable is reported as
// taking effect at the next start.

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "BackendProbe.h"
#include "HttpClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

std::string word(uint16_t port) {
  auto reply = http_exchange(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5000);
  return reply ? reply->body : "(" + reply.error().message() + ")";
}

class ReloadHook : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    ServerProcess::Options options;
    options.binary = UCP_RELOAD_PROBE;
    options.overrides = {"event_loop.backend=" + GetParam()};
    server_ = std::make_unique<ServerProcess>(options);
    ASSERT_TRUE(server_->start()) << server_->error();
    std::ifstream in(server_->dir() + "/test.conf");
    std::stringstream text;
    text << in.rdbuf();
    base_ = text.str();
  }
  /// Rewrites the config file with `more` after the generated part, then sends SIGHUP.
  void reload_with(const std::string& more) {
    std::ofstream(server_->dir() + "/test.conf", std::ios::trunc) << base_ << more;
    server_->send_signal(SIGHUP);
  }

  std::unique_ptr<ServerProcess> server_;
  std::string base_;
};

INSTANTIATE_TEST_SUITE_P(Backends, ReloadHook, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

TEST_P(ReloadHook, AReloadableKeyIsAppliedWhileTheServerRuns) {
  EXPECT_EQ(word(server_->port()), "first");
  reload_with("[probe]\nword = second\n[server]\nmax_connections = 5\n");
  ASSERT_TRUE(server_->wait_for_output("probe.word: first -> second (applied)", 15000))
      << server_->output_tail();
  EXPECT_TRUE(server_->wait_for_output(
      "server.max_connections: 100000 -> 5 (takes effect at the next start)", 15000))
      << server_->output_tail();
  EXPECT_EQ(word(server_->port()), "second");
  // Reloaded again unchanged: nothing new to apply, and the non-reloadable key is still
  // reported (it still differs from what runs).
  reload_with("[probe]\nword = second\n[server]\nmax_connections = 5\n");
  EXPECT_TRUE(server_->wait_for_output("read again: 1 change(s)", 15000)) << server_->output_tail();
  EXPECT_TRUE(server_->stop(SIGTERM).clean()) << server_->output_tail();
}

TEST_P(ReloadHook, ARefusedOrBrokenConfigurationLeavesTheRunningOne) {
  reload_with("[probe]\nword = refuse\n");
  ASSERT_TRUE(
      server_->wait_for_output("probe.word: \"refuse\" is refused; keeping the running "
                               "configuration",
                               15000))
      << server_->output_tail();
  EXPECT_EQ(word(server_->port()), "first");
  // Two problems in one file: both in one ERROR line.
  reload_with("[probe]\nword = third\nwrod = x\n[server]\nport = 70000\n");
  for (int i = 0; i < 3000 && server_->count_output_lines("keeping the running") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server_->count_output_lines("probe.wrod: unknown key (did you mean probe.word?); "), 1u)
      << server_->output_tail();
  EXPECT_EQ(word(server_->port()), "first");
  reload_with("[probe]\nword = fourth\n");
  ASSERT_TRUE(server_->wait_for_output("probe.word: first -> fourth (applied)", 15000))
      << server_->output_tail();
  EXPECT_EQ(word(server_->port()), "fourth");
  EXPECT_TRUE(server_->stop(SIGTERM).clean()) << server_->output_tail();
}

}  // namespace
}  // namespace ucp::test
