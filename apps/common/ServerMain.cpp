#include "ServerMain.h"

#include <csignal>
#include <cstdio>
#include <vector>

#include <pthread.h>
#include <sys/signalfd.h>

#include "ucp/io/Operations.h"
#include "ucp/log/Logger.h"

namespace ucp::app {
namespace {

// Waits on the signalfd through the main ring: SIGINT/SIGTERM start a graceful stop.
Task<> watch_signals(TcpServer& server, int signal_fd) {
  signalfd_siginfo info{};
  auto n =
      co_await io::read(server.main_loop(), signal_fd, std::as_writable_bytes(std::span(&info, 1)));
  if (n && *n == sizeof info) {
    LOG_INFO("signal {} received: stopping", info.ssi_signo);
    server.stop();
  }
}

}  // namespace

ServerMain::ServerMain(std::string program) : program_(std::move(program)) {}

std::optional<int> ServerMain::setup(int argc, char** argv) {
  const std::string usage = "usage: " + program_ +
                            " [CONFIG] [--set section.key=value]...\n"
                            "  CONFIG defaults to config/ucp.conf; --set overrides one key "
                            "(repeatable).\n";
  std::string config_path = "config/ucp.conf";
  std::vector<std::string> overrides;
  bool have_path = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage.c_str(), stdout);
      return 0;
    }
    if (arg == "--set") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: --set needs section.key=value\n%s", program_.c_str(),
                     usage.c_str());
        return 2;
      }
      overrides.emplace_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "%s: unknown option %s\n%s", program_.c_str(), arg.c_str(),
                   usage.c_str());
      return 2;
    } else if (have_path) {
      std::fprintf(stderr, "%s: more than one CONFIG given\n%s", program_.c_str(), usage.c_str());
      return 2;
    } else {
      config_path = arg;
      have_path = true;
    }
  }

  try {
    config_ = Config::load(config_path, overrides);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

  // SIGPIPE must never kill the server (sends also use MSG_NOSIGNAL). SIGINT/SIGTERM are
  // blocked in every thread (threads inherit the mask) and read from a signalfd instead.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal_fd_ = UniqueFd(::signalfd(-1, &stop_signals, SFD_CLOEXEC));

  if (auto error = Logger::init(config_.log); !error.empty()) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), error.c_str());
    return 1;
  }
  return std::nullopt;
}

LoopOptions ServerMain::loop_options() const {
  const EventLoopConfig& c = config_.event_loop;
  LoopOptions options;
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

ServerOptions ServerMain::server_options() const {
  const ServerConfig& c = config_.server;
  ServerOptions options;
  options.ip = c.ip;
  options.port = c.port;
  options.thread_num = c.thread_num;
  options.read_timeout_ms = c.read_timeout_ms;
  options.max_connections = c.max_connections;
  options.listen.backlog = c.backlog;
  options.listen.reuse_port = c.reuse_port;
  options.tcp_nodelay = c.tcp_nodelay;
  options.shutdown_timeout_ms = c.shutdown_timeout_ms;
  options.msg_ring_handoff = config_.event_loop.msg_ring_handoff;  // kept in [event_loop]
  options.max_output_bytes = c.max_output_bytes;
  return options;
}

int ServerMain::serve(TcpServer& server, std::string_view what) {
  std::string warnings;
  if (auto error = server.start(&warnings); !error.empty()) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), error.c_str());
    LOG_ERROR("start-up failed: {}", error);
    Logger::shutdown();
    return 1;
  }
  for (size_t begin = 0; begin < warnings.size();) {
    const size_t end = warnings.find('\n', begin);
    LOG_WARN("{}", warnings.substr(begin, end - begin));
    begin = end == std::string::npos ? warnings.size() : end + 1;
  }
  LOG_INFO("{} ({}) io_uring: {}", config_.server.name, what,
           server.main_loop().features().describe());
  server.main_loop().spawn(watch_signals(server, signal_fd_.get()));
  LOG_INFO("listening on {}", server.local_address().to_string());
  server.run();
  LOG_INFO("stopped cleanly");
  Logger::shutdown();
  return 0;
}

int ServerMain::usage_error(std::string_view what) const {
  std::fprintf(stderr, "%s: %.*s\n", program_.c_str(), static_cast<int>(what.size()), what.data());
  Logger::shutdown();
  return 2;
}

}  // namespace ucp::app
