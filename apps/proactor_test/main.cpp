// bin/proactor_test [CONFIG] [--set section.key=value]...  (SPEC §4)
// Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage or config.

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <sys/signalfd.h>
#include <unistd.h>

#include "ucp/config/Config.h"
#include "ucp/io/Operations.h"
#include "ucp/log/Logger.h"
#include "ucp/net/TcpServer.h"

#include "Protocols.h"

namespace {

constexpr const char* kUsage =
    "usage: proactor_test [CONFIG] [--set section.key=value]...\n"
    "  CONFIG defaults to config/ucp.conf; --set overrides one key (repeatable).\n";

ucp::LoopOptions loop_options_from(const ucp::EventLoopConfig& c) {
  ucp::LoopOptions options;
  options.backend = c.backend == "io_uring" ? ucp::BackendKind::kIoUring
                    : c.backend == "epoll"  ? ucp::BackendKind::kEpoll
                                            : ucp::BackendKind::kAuto;
  options.ring_entries = c.ring_entries;
  options.sqpoll = c.sqpoll;
  options.sqpoll_idle_ms = c.sqpoll_idle_ms;
  options.pending_queue_capacity = c.pending_queue_capacity;
  options.defer_taskrun = c.defer_taskrun;
  options.provided_buffers_count = c.multishot_recv ? c.provided_buffers_count : 0;
  options.provided_buffer_size = c.provided_buffer_size;
  options.registered_buffers_count = c.registered_buffers_count;
  options.registered_buffer_size = c.registered_buffer_size;
  options.cqe_batch = c.cqe_batch;
  return options;
}

ucp::ServerOptions server_options_from(const ucp::ServerConfig& c,
                                       const ucp::EventLoopConfig& loop) {
  ucp::ServerOptions options;
  options.ip = c.ip;
  options.port = c.port;
  options.thread_num = c.thread_num;
  options.read_timeout_ms = c.read_timeout_ms;
  options.max_connections = c.max_connections;
  options.listen.backlog = c.backlog;
  options.listen.reuse_port = c.reuse_port;
  options.tcp_nodelay = c.tcp_nodelay;
  options.shutdown_timeout_ms = c.shutdown_timeout_ms;
  options.msg_ring_handoff = loop.msg_ring_handoff;  // a server choice kept in [event_loop]
  options.max_output_bytes = c.max_output_bytes;
  return options;
}

// Waits on a signalfd through the main ring: SIGINT/SIGTERM start a graceful stop.
ucp::Task<> watch_signals(ucp::TcpServer& server, int signal_fd) {
  signalfd_siginfo info{};
  auto n = co_await ucp::io::read(server.main_loop(), signal_fd,
                                  std::as_writable_bytes(std::span(&info, 1)));
  if (n && *n == sizeof info) {
    LOG_INFO("signal {} received: stopping", info.ssi_signo);
    server.stop();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = "config/ucp.conf";
  std::vector<std::string> overrides;
  bool have_path = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--set") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "proactor_test: --set needs section.key=value\n%s", kUsage);
        return 2;
      }
      overrides.emplace_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "proactor_test: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (have_path) {
      std::fprintf(stderr, "proactor_test: more than one CONFIG given\n%s", kUsage);
      return 2;
    } else {
      config_path = arg;
      have_path = true;
    }
  }

  ucp::Config config;
  try {
    config = ucp::Config::load(config_path, overrides);
  } catch (const ucp::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

  // SIGPIPE must never kill the server (sends also use MSG_NOSIGNAL). SIGINT/SIGTERM are
  // blocked in every thread and read from a signalfd by the main loop instead.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ucp::UniqueFd signal_fd(::signalfd(-1, &stop_signals, SFD_CLOEXEC));

  if (auto error = ucp::Logger::init(config.log); !error.empty()) {
    std::fprintf(stderr, "proactor_test: %s\n", error.c_str());
    return 1;
  }
  if (config.server.protocol != "echo" && config.server.protocol != "http") {
    std::fprintf(stderr, "proactor_test: server.protocol must be echo or http\n");
    return 2;
  }

  size_t max_request_bytes = config.server.max_request_bytes;
  ucp::TcpServer::Handler handler;
  if (config.server.protocol == "http") {
    handler = [max_request_bytes](ucp::TcpConnection& c) {
      return ucp::app::http_pingpong(c, max_request_bytes);
    };
  } else {
    handler = [](ucp::TcpConnection& c) { return ucp::app::echo(c); };
  }

  ucp::TcpServer server(server_options_from(config.server, config.event_loop),
                        loop_options_from(config.event_loop), std::move(handler));
  std::string warnings;
  if (auto error = server.start(&warnings); !error.empty()) {
    std::fprintf(stderr, "proactor_test: %s\n", error.c_str());
    LOG_ERROR("start-up failed: {}", error);
    ucp::Logger::shutdown();
    return 1;
  }
  for (size_t begin = 0; begin < warnings.size();) {
    size_t end = warnings.find('\n', begin);
    LOG_WARN("{}", warnings.substr(begin, end - begin));
    begin = end == std::string::npos ? warnings.size() : end + 1;
  }
  LOG_INFO("{} ({}) {}", config.server.name, config.server.protocol, server.describe_loops());
  server.main_loop().spawn(watch_signals(server, signal_fd.get()));
  LOG_INFO("listening on {}", server.local_address().to_string());
  server.run();
  LOG_INFO("stopped cleanly");
  ucp::Logger::shutdown();
  return 0;
}
