// The runtime's command line through the binaries: --help lists every key with its type,
// default and meaning; --check-config reports every problem of a file (exit 2) or "ok" (exit
// 0); bad usage is exit 2; the original example configuration loads verbatim in both.

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Command.h"

namespace ucp::test {
namespace {

const std::string kProactor = UCP_BIN_DIR "/proactor_test";
const std::string kHttp = UCP_BIN_DIR "/http_server";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

TEST(CommandLine, HelpListsEveryKeyWithItsTypeDefaultAndMeaning) {
  for (const std::string& binary : {kProactor, kHttp}) {
    const auto help = run_command({binary, "--help"}, 10000);
    ASSERT_EQ(help.exit_code, 0) << help.output;
    for (const char* line : {"usage: ", "--takeover PATH", "--check-config", "[server]  ",
                             "  port = 8888                       (integer 0..65535)",
                             "  read_timeout_ms = 5000            (duration 0..86400000 ms",
                             "  max_output_bytes = 4194304        (size 1024..4294967296 bytes",
                             "  takeover_socket =                 (text)",
                             "  level = INFO                      "
                             "(TRACE|DEBUG|INFO|WARN|ERROR|FATAL (any "
                             "case); SIGHUP applies it)",
                             "  protocol = echo                   (echo|http|udp_echo|websocket)",
                             "  root = www                        (text, not empty)",
                             "[event_loop]", "[log]", "[http]"}) {
      EXPECT_NE(help.output.find(line), std::string::npos) << binary << ": " << line;
    }
  }
}

TEST(CommandLine, CheckConfigReportsEveryProblem) {
  const std::string bad = write_temp("check-bad.conf",
                                     "[server]\nport = 70000\nprot = 1\n[lgo]\nlevel = x\n"
                                     "[http]\nmax_body_bytes = 2GiB\n");
  const auto checked =
      run_command({kProactor, "--check-config", bad, "--set", "server.thread_nm=2"}, 10000);
  EXPECT_EQ(checked.exit_code, 2) << checked.output;
  EXPECT_EQ(checked.output, bad + ":2: server.port: 70000 is out of range [0, 65535]\n" + bad +
                                ":3: server.prot: unknown key (did you mean server.port?)\n" + bad +
                                ":4: unknown section [lgo] (did you mean [log]?)\n" + bad +
                                ":7: http.max_body_bytes: 2GiB (2147483648 bytes) is out of "
                                "range [0, 1073741824]\n"
                                "--set:1: server.thread_nm: unknown key (did you mean "
                                "server.thread_num?)\n");
  const auto shipped =
      run_command({kHttp, "--check-config", UCP_SOURCE_DIR "/config/ucp.conf"}, 10000);
  EXPECT_EQ(shipped.exit_code, 0) << shipped.output;
  EXPECT_EQ(shipped.output, UCP_SOURCE_DIR "/config/ucp.conf: ok\n");
}

TEST(CommandLine, TheOriginalExampleLoadsVerbatimInBothBinaries) {
  const std::string seed = write_temp("seed.conf", R"ini([server]
name = TcpServer
ip = 0.0.0.0
port = 8888
thread_num = 16          ; worker threads; 0 = one per CPU
read_timeout_ms = 5000   ; idle read timeout, 0 = none
[event_loop]
ring_entries = 32768
sqpoll = true
sqpoll_idle_ms = 50
registered_buffers_count = 16384
registered_buffer_size = 4096
pending_queue_capacity = 65536   ; SQEs waiting when the SQ is full
[log]
level = INFO             ; TRACE DEBUG INFO WARN ERROR FATAL
file = logs/server.log
max_size = 104857600     ; bytes per file before rolling
max_files = 10
async = true
console = true
flush_interval_ms = 1000
)ini");
  for (const std::string& binary : {kProactor, kHttp}) {
    const auto checked = run_command({binary, "--check-config", seed}, 10000);
    EXPECT_EQ(checked.exit_code, 0) << binary << ": " << checked.output;
  }
}

TEST(CommandLine, BadUsageIsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{kProactor, "--frobnicate"},
                                             {kProactor, "a.conf", "b.conf"},
                                             {kProactor, "--set"},
                                             {kHttp, "--takeover"}}) {
    const auto result = run_command(args, 10000);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.output;
    EXPECT_NE(result.output.find("usage: "), std::string::npos) << result.output;
  }
}

}  // namespace
}  // namespace ucp::test
