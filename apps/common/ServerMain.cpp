#include "ServerMain.h"

#include <cstdio>
#include <new>

#include "ucp/http/HttpServer.h"
#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"
#include "ucp/version.h"

#include "Signals.h"

namespace ucp::app {

ServerMain::ServerMain(std::string program) : program_(std::move(program)) {}

std::optional<int> ServerMain::setup(int argc, char** argv) {
  // Before anything else, and before any thread exists: every thread inherits the mask, and
  // a signal raised from here on waits in the signalfd instead of killing the process.
  signal_fd_ = block_handled_signals();

  const std::string usage =
      "usage: " + program_ + " [CONFIG] [--set section.key=value]...\n       " + program_ +
      " --version\n"
      "  CONFIG defaults to config/ucp.conf; --set overrides one key (repeatable).\n"
      "  With one socket passed by a service manager (LISTEN_FDS, LISTEN_PID: systemd socket\n"
      "  activation) it accepts on that socket; server.ip, port, backlog, reuse_port are unused.\n";
  bool have_path = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage.c_str(), stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("%s (UCP) %s\n", program_.c_str(), UCP_VERSION_STRING);
      return 0;
    }
    if (arg == "--set") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: --set needs section.key=value\n%s", program_.c_str(),
                     usage.c_str());
        return 2;
      }
      overrides_.emplace_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides_.push_back(arg.substr(6));
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "%s: unknown option %s\n%s", program_.c_str(), arg.c_str(),
                   usage.c_str());
      return 2;
    } else if (have_path) {
      std::fprintf(stderr, "%s: more than one CONFIG given\n%s", program_.c_str(), usage.c_str());
      return 2;
    } else {
      config_path_ = arg;
      have_path = true;
    }
  }

  // Taken before any thread starts (it edits the environment); adopted in server_options().
  auto inherited = take_inherited_listen_fds();
  if (!inherited) {
    std::fprintf(stderr, "%s: LISTEN_PID/LISTEN_FDS from the service manager: %s\n",
                 program_.c_str(), inherited.error().message().c_str());
    return 2;
  }
  if (inherited->size() > 1) {
    std::fprintf(stderr,
                 "%s: the service manager passed %zu sockets; give the .socket unit one "
                 "ListenStream\n",
                 program_.c_str(), inherited->size());
    return 2;
  }
  inherited_ = std::move(*inherited);

  auto loaded = Config::load(config_path_, overrides_);
  if (!loaded) {
    std::fprintf(stderr, "%s\n", loaded.error().message.c_str());
    return 2;
  }
  config_ = std::move(*loaded);
  if (auto logging = Logger::init(config_.log); !logging) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), logging.error().message.c_str());
    return 1;
  }
  return std::nullopt;
}

LoopOptions ServerMain::loop_options() const {
  const EventLoopConfig c = config_.worker_loop();
  LoopOptions options;
  options.backend = c.backend == "io_uring" ? BackendKind::kIoUring
                    : c.backend == "epoll"  ? BackendKind::kEpoll
                                            : BackendKind::kAuto;
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
  options.acceptors = c.acceptors == "per_worker" ? Acceptors::kPerWorker : Acceptors::kMain;
  options.tcp_nodelay = c.tcp_nodelay;
  options.shutdown_timeout_ms = c.shutdown_timeout_ms;
  options.msg_ring_handoff = config_.event_loop.msg_ring_handoff;  // kept in [event_loop]
  options.max_output_bytes = c.max_output_bytes;
  options.write_timeout_ms = c.write_timeout_ms;
  // The server takes the inherited socket over; asking twice would hand it out twice.
  if (!inherited_.empty()) options.listen_fd = inherited_.front().get();
  return options;
}

namespace {

// A TcpServer seen as a Service.
class TcpService final : public Service {
 public:
  TcpService(TcpServer& server, bool socket_activated)
      : server_(server), socket_activated_(socket_activated) {}
  Result<void, Error> start(std::string* warnings) override { return server_.start(warnings); }
  void run() override { server_.run(); }
  void stop() noexcept override { server_.stop(); }
  void stop_now() noexcept override { server_.stop_now(); }
  EventLoop& main_loop() noexcept override { return server_.main_loop(); }
  std::string listening() const override {
    return server_.local_address().to_string() +
           (socket_activated_ ? " (socket passed by the service manager)" : "");
  }
  std::string describe_loops() const override { return server_.describe_loops(); }
  TcpServer* tcp_server() noexcept override { return &server_; }

 private:
  TcpServer& server_;
  bool socket_activated_;
};

}  // namespace

int ServerMain::serve(http::HttpServer& server, std::string_view what) {
  return serve(server.tcp(), what, [&server] {
    uint64_t answered = 0;
    for (const http::WorkerStats& worker : server.stats()) {
      for (uint64_t count : worker.responses) answered += count;
      answered += worker.informational;
    }
    return answered;
  });
}

int ServerMain::serve(TcpServer& server, std::string_view what, RequestCounter requests) {
  // The server owns the inherited socket from start() on, whatever happens.
  const bool socket_activated = !inherited_.empty();
  if (socket_activated) (void)inherited_.front().release();
  TcpService service(server, socket_activated);
  return run_service(service, what, std::move(requests));
}

int ServerMain::serve(Service& service, std::string_view what) {
  if (!inherited_.empty()) {
    return usage_error("the service manager passed a TCP listening socket; " + std::string(what) +
                       " binds server.ip:server.port itself (remove the .socket unit)");
  }
  return run_service(service, what, {});
}

int ServerMain::run_service(Service& server, std::string_view what, RequestCounter requests) {
  // Until the main loop runs, a thread of its own reads the signals.
  StartupSignalWatch startup_signals(signal_fd_.get());
  LOG_INFO("{} (UCP {}) starting, config {}", program_, UCP_VERSION_STRING, config_path_);
  const auto machine = MachineLimits::current();
  LOG_INFO(
      "start-up memory: {} worker(s) x {} bytes + {} bytes = {} bytes (mapped; pages "
      "become resident as they are used), of {} bytes of RAM",
      config_.worker_count(machine), config_.worker_startup_bytes(), config_.shared_startup_bytes(),
      config_.startup_bytes(machine), machine.memory_bytes);
  std::string warnings;
  if (auto started = server.start(&warnings); !started) {
    startup_signals.finish();
    const std::string& error = started.error().message;
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), error.c_str());
    LOG_ERROR("start-up failed: {}", error);
    Logger::shutdown();
    return 1;
  }
  startup_signals.finish();
  for (size_t begin = 0; begin < warnings.size();) {
    const size_t end = warnings.find('\n', begin);
    LOG_WARN("{}", warnings.substr(begin, end - begin));
    begin = end == std::string::npos ? warnings.size() : end + 1;
  }
  LOG_INFO("{} ({}) {}", config_.server.name, what, server.describe_loops());
  ConfigReloader reloader(config_path_, overrides_, config_);
  server.main_loop().spawn(watch_signals(server, signal_fd_.get(), reloader));
  if (config_.log.stats_interval_ms > 0 && server.tcp_server() != nullptr) {
    server.main_loop().spawn(log_stats(*server.tcp_server(),
                                       std::chrono::milliseconds(config_.log.stats_interval_ms),
                                       std::move(requests)));
  }
  LOG_INFO("listening on {}", server.listening());
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

int ServerMain::report_uncaught(const std::exception& error) noexcept {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) {
    std::fputs("out of memory at start-up (RLIMIT_AS, the overcommit policy or RAM)\n", stderr);
  } else {
    std::fprintf(stderr, "start-up failed: %s\n", error.what());
  }
  Logger::shutdown();
  return 1;
}

}  // namespace ucp::app
