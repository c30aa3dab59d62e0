// bin/proactor_test [CONFIG] [--set section.key=value]...  (docs/design.md, "proactor_test")
// Exit codes: 0 clean stop, 1 start-up failure, 2 bad usage or config.
// Started by a service manager with a listening socket (LISTEN_FDS=1, LISTEN_PID = this
// process: systemd socket activation), it accepts on that socket instead of binding.

#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "ucp/config/Config.h"
#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"
#include "ucp/net/TcpServer.h"
#include "ucp/version.h"

#include "Protocols.h"
#include "Signals.h"

namespace {

constexpr const char* kUsage =
    "usage: proactor_test [CONFIG] [--set section.key=value]...\n"
    "       proactor_test --version\n"
    "  CONFIG defaults to config/ucp.conf; --set overrides one key (repeatable).\n"
    "  With one socket passed by a service manager (LISTEN_FDS, LISTEN_PID: systemd socket\n"
    "  activation) it accepts on that socket; server.ip, port, backlog, reuse_port are unused.\n";

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

int serve(int argc, char** argv) {
  // Before anything else, and before any thread exists: every thread inherits the mask, and
  // a signal raised from here on waits in the signalfd instead of killing the process.
  ucp::UniqueFd signal_fd = ucp::app::block_handled_signals();

  std::string config_path = "config/ucp.conf";
  std::vector<std::string> overrides;
  bool have_path = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("proactor_test (UCP) %s\n", UCP_VERSION_STRING);
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

  // Taken before any thread starts (it edits the environment); adopted below.
  auto inherited = ucp::take_inherited_listen_fds();
  if (!inherited) {
    std::fprintf(stderr, "proactor_test: LISTEN_PID/LISTEN_FDS from the service manager: %s\n",
                 inherited.error().message().c_str());
    return 2;
  }
  if (inherited->size() > 1) {
    std::fprintf(stderr,
                 "proactor_test: the service manager passed %zu sockets; give the .socket unit "
                 "one ListenStream\n",
                 inherited->size());
    return 2;
  }

  ucp::Config config;
  try {
    config = ucp::Config::load(config_path, overrides);
  } catch (const ucp::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

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

  // Until the main loop runs, a thread of its own reads the signals.
  ucp::app::StartupSignalWatch startup_signals(signal_fd.get());
  LOG_INFO("proactor_test (UCP {}) starting, config {}", UCP_VERSION_STRING, config_path);
  const auto machine = ucp::MachineLimits::current();
  LOG_INFO(
      "start-up memory: {} worker(s) x {} bytes + {} bytes = {} bytes (mapped; pages "
      "become resident as they are used), of {} bytes of RAM",
      config.worker_count(machine), config.worker_startup_bytes(), config.shared_startup_bytes(),
      config.startup_bytes(machine), machine.memory_bytes);
  ucp::ServerOptions server_options = server_options_from(config.server, config.event_loop);
  const bool socket_activated = !inherited->empty();
  if (socket_activated) server_options.listen_fd = inherited->front().release();
  ucp::TcpServer server(server_options, loop_options_from(config.event_loop), std::move(handler));
  std::string warnings;
  if (auto error = server.start(&warnings); !error.empty()) {
    startup_signals.finish();
    std::fprintf(stderr, "proactor_test: %s\n", error.c_str());
    LOG_ERROR("start-up failed: {}", error);
    ucp::Logger::shutdown();
    return 1;
  }
  startup_signals.finish();
  for (size_t begin = 0; begin < warnings.size();) {
    size_t end = warnings.find('\n', begin);
    LOG_WARN("{}", warnings.substr(begin, end - begin));
    begin = end == std::string::npos ? warnings.size() : end + 1;
  }
  LOG_INFO("{} ({}) {}", config.server.name, config.server.protocol, server.describe_loops());
  ucp::app::ConfigReloader reloader(config_path, overrides, config);
  server.main_loop().spawn(ucp::app::watch_signals(server, signal_fd.get(), reloader));
  LOG_INFO("listening on {}{}", server.local_address().to_string(),
           socket_activated ? " (socket passed by the service manager)" : "");
  server.run();
  LOG_INFO("stopped cleanly");
  ucp::Logger::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The I/O path reports errors as values; what can still throw is an allocation the process
  // cannot have while it sets up (or a thread it cannot start): one line and exit 1, never
  // an uncaught exception.
  try {
    return serve(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("proactor_test: out of memory (RLIMIT_AS, the overcommit policy or RAM)\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "proactor_test: %s\n", e.what());
  }
  ucp::Logger::shutdown();
  return 1;
}
