#include "ucp/app/Application.h"

#include <chrono>
#include <cstdio>
#include <new>

#include "ucp/io/Operations.h"
#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"
#include "ucp/tls/KernelTls.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/version.h"

#include "SignalWatch.h"
#include "StatsLog.h"
#include "Takeover.h"

namespace ucp::app {

/// What the runtime holds between setup() and the end of serve(). Main thread, then the
/// main loop's (the same thread).
struct Application::Runtime {
  UniqueFd signal_fd;
  std::vector<UniqueFd> adopted;  // listening sockets: a service manager's, or taken over
  std::string adopted_from;       // what the "listening on" line says about them
  std::optional<TakeoverClient> takeover;
  std::unique_ptr<TakeoverListener> listener;
  std::shared_ptr<tls::TlsContextHolder> tls;  // [tls] enabled: the context in use
  bool stopping = false;
};

namespace {

// A TcpServer seen as a Service.
class TcpService : public Service {
 public:
  explicit TcpService(TcpServer& server) : server_(server) {}
  Result<void, Error> start(std::string* warnings) override { return server_.start(warnings); }
  void run() override { server_.run(); }
  void stop() noexcept override { server_.stop(); }
  void stop_now() noexcept override { server_.stop_now(); }
  EventLoop& main_loop() noexcept override { return server_.main_loop(); }
  std::string listening() const override { return server_.local_address().to_string(); }
  std::string describe_loops() const override { return server_.describe_loops(); }
  std::vector<int> listening_fds() const override { return server_.listening_fds(); }
  void drain() noexcept override { server_.drain(); }
  size_t connection_count() const noexcept override { return server_.connection_count(); }
  TcpServer* tcp_server() noexcept override { return &server_; }

 private:
  TcpServer& server_;
};

// An HttpServer: its drain also ends keep-alive (Connection: close), and it counts requests.
class HttpService final : public TcpService {
 public:
  explicit HttpService(http::HttpServer& server) : TcpService(server.tcp()), http_(server) {}
  // HttpServer::start: what the server sets up once its routes are final (its metrics).
  Result<void, Error> start(std::string* warnings) override { return http_.start(warnings); }
  void drain() noexcept override { http_.drain(); }
  std::optional<uint64_t> requests() const override {
    uint64_t answered = 0;
    for (const http::WorkerStats& worker : http_.stats()) {
      for (uint64_t count : worker.responses) answered += count;
      answered += worker.informational;
    }
    return answered;
  }

 private:
  http::HttpServer& http_;
};

// After a successor took the listening sockets: stop accepting, let the connections end (an
// HTTP server answers each one's next request with Connection: close), then stop as a SIGTERM
// would, at the latest after server.shutdown_timeout_ms.
Task<> drain_then_stop(Service& service, bool& stopping, std::chrono::milliseconds timeout) {
  service.drain();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!stopping && service.connection_count() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    co_await io::sleep_for(service.main_loop(), std::chrono::milliseconds(10));
  }
  if (stopping) co_return;  // a signal stopped the server meanwhile
  stopping = true;
  LOG_INFO("takeover: {} connection(s) still open; stopping", service.connection_count());
  service.stop();
}

}  // namespace

Application::Application(std::string program)
    : program_(std::move(program)),
      schema_(std::make_unique<ConfigSchema>()),
      runtime_(std::make_unique<Runtime>()) {
  declare_server_sections(*schema_, &adjust_);
}

Application::~Application() = default;

std::optional<int> Application::parse_command_line(int argc, char** argv) {
  const std::string usage =
      "usage: " + program_ + " [CONFIG] [--set section.key=value]... [--takeover PATH]\n       " +
      program_ + " --check-config [CONFIG] [--set section.key=value]...\n       " + program_ +
      " --help | --version\n" +
      (default_config_.empty() ? "  Without CONFIG every key has its default"
                               : "  CONFIG defaults to " + default_config_) +
      "; --set overrides one key (repeatable).\n"
      "  --check-config: load and check the configuration, print \"CONFIG: ok\" or every problem.\n"
      "  --takeover PATH: take the listening sockets over from the server waiting at PATH (its\n"
      "  server.takeover_socket); it stops accepting and drains once this one serves.\n"
      "  With one socket passed by a service manager (LISTEN_FDS, LISTEN_PID: systemd socket\n"
      "  activation) it accepts on that socket; server.ip, port, backlog, reuse_port are unused.\n";
  auto bad_usage = [&](const std::string& what) {
    std::fprintf(stderr, "%s: %s\n%s", program_.c_str(), what.c_str(), usage.c_str());
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\nConfiguration keys (KEY = DEFAULT, then its type and meaning):\n%s",
                  usage.c_str(), schema_->describe().c_str());
      return 0;
    }
    if (arg == "--version") {
      std::printf("%s (UCP) %s\n", program_.c_str(), UCP_VERSION_STRING);
      return 0;
    }
    if (arg == "--check-config") {
      check_only_ = true;
    } else if (arg == "--set" || arg == "--takeover") {
      if (i + 1 >= argc) {
        return bad_usage(arg + (arg == "--set" ? " needs section.key=value" : " needs PATH"));
      }
      (arg == "--set" ? overrides_.emplace_back() : takeover_from_) = argv[++i];
    } else if (arg.rfind("--set=", 0) == 0) {
      overrides_.push_back(arg.substr(6));
    } else if (arg.rfind("--takeover=", 0) == 0) {
      takeover_from_ = arg.substr(11);
    } else if (!arg.empty() && arg[0] == '-') {
      return bad_usage("unknown option " + arg);
    } else if (have_config_path_) {
      return bad_usage("more than one CONFIG given");
    } else {
      config_path_ = arg;
      have_config_path_ = true;
    }
  }
  if (!have_config_path_) config_path_ = default_config_;
  return std::nullopt;
}

std::optional<int> Application::setup(int argc, char** argv) {
  // Before anything else, and before any thread exists: every thread inherits the mask, and
  // a signal raised from here on waits in the signalfd instead of killing the process.
  runtime_->signal_fd = block_handled_signals();
  if (auto exit_code = parse_command_line(argc, argv)) return exit_code;

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
  if (!inherited->empty()) {
    runtime_->adopted = std::move(*inherited);
    runtime_->adopted_from = " (socket passed by the service manager)";
  }

  auto loaded = Config::load(*schema_, config_path_, overrides_);
  if (!loaded) {
    for (const std::string& problem : loaded.error().problems) {
      std::fprintf(stderr, "%s\n", problem.c_str());
    }
    return 2;
  }
  config_.emplace(std::move(*loaded));
  if (check_only_) {
    std::printf("%s: ok\n", config_path_.empty() ? "defaults and --set" : config_path_.c_str());
    return 0;
  }
  settings_ = server_settings(*config_);
  settings_.log.sinks = log_sinks_;
  if (auto logging = Logger::init(settings_.log); !logging) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), logging.error().message.c_str());
    return 1;
  }
  if (settings_.tls) {
    // The files passed the configuration's check a moment ago; this reads them once more.
    runtime_->tls = std::make_shared<tls::TlsContextHolder>();
    if (auto tls_loaded = runtime_->tls->load(*settings_.tls); !tls_loaded) {
      return usage_error(tls_loaded.error().message);
    }
  }
  if (!takeover_from_.empty()) {
    if (!runtime_->adopted.empty()) {
      return usage_error("--takeover with a socket passed by the service manager: use one");
    }
    auto client = TakeoverClient::connect(takeover_from_, program_);
    if (!client) {
      const std::string what =
          "cannot take over from " + takeover_from_ + ": " + client.error().message;
      std::fprintf(stderr, "%s: %s\n", program_.c_str(), what.c_str());
      LOG_ERROR("{}", what);
      Logger::shutdown();
      return 1;
    }
    runtime_->adopted = std::move(client->sockets());
    runtime_->adopted_from = " (taken over from pid " + std::to_string(client->old_pid()) + ")";
    LOG_INFO("takeover: {} listening socket(s) from pid {} ({})", runtime_->adopted.size(),
             client->old_pid(), takeover_from_);
    runtime_->takeover.emplace(std::move(*client));
  }
  return std::nullopt;
}

LoopOptions Application::loop_options() const {
  LoopOptions loop = settings_.loop;
  if (adjust_) adjust_(*config_, loop);
  return loop;
}

ServerOptions Application::server_options() const {
  ServerOptions options = settings_.server;
  // The server takes the sockets over in start(); serve() lets go of them first.
  for (const UniqueFd& fd : runtime_->adopted) options.listen_fds.push_back(fd.get());
  options.tls = runtime_->tls;
  return options;
}

int Application::serve(TcpServer& server, std::string_view what) {
  TcpService service(server);
  return run_service(service, what, true);
}

int Application::serve(http::HttpServer& server, std::string_view what) {
  HttpService service(server);
  return run_service(service, what, true);
}

int Application::serve(Service& service, std::string_view what) {
  return run_service(service, what, false);
}

int Application::run_service(Service& service, std::string_view what, bool adopts_sockets) {
  Runtime& rt = *runtime_;
  if (!rt.adopted.empty() && !adopts_sockets) {
    return usage_error(
        (rt.takeover ? std::string("--takeover: ") + std::string(what) +
                           " binds server.ip:server.port itself and cannot take sockets over"
                     : "the service manager passed a TCP listening socket; " + std::string(what) +
                           " binds server.ip:server.port itself (remove the .socket unit)"));
  }
  // The server owns the adopted sockets from start() on, whatever happens.
  for (UniqueFd& fd : rt.adopted) (void)fd.release();
  rt.adopted.clear();
  // Until the main loop runs, a thread of its own reads the signals.
  StartupSignalWatch startup_signals(rt.signal_fd.get());
  auto fail = [&](const std::string& error) {
    startup_signals.finish();
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), error.c_str());
    LOG_ERROR("start-up failed: {}", error);
    Logger::shutdown();
    return 1;
  };
  LOG_INFO("{} (UCP {}) starting, {}", program_, UCP_VERSION_STRING,
           config_path_.empty() ? std::string("no config file") : "config " + config_path_);
  const auto machine = MachineLimits::current();
  const StartupMemory memory =
      startup_memory(settings_.server, loop_options(), settings_.log, machine);
  LOG_INFO(
      "start-up memory: {} worker(s) x {} bytes + {} bytes = {} bytes (mapped; pages "
      "become resident as they are used), of {} bytes of RAM",
      memory.workers, memory.per_worker, memory.shared, memory.total(), machine.memory_bytes);
  if (rt.tls) log_tls_start();
  std::string warnings;
  if (auto started = service.start(&warnings); !started) return fail(started.error().message);
  startup_signals.finish();
  for (size_t begin = 0; begin < warnings.size();) {
    const size_t end = warnings.find('\n', begin);
    LOG_WARN("{}", warnings.substr(begin, end - begin));
    begin = end == std::string::npos ? warnings.size() : end + 1;
  }
  LOG_INFO("{} ({}) {}", settings_.name, what, service.describe_loops());

  if (rt.takeover) {
    // The old server stops accepting once this one says it serves; connections that wait in
    // the sockets' queues meanwhile are accepted by whichever accepts first.
    if (auto confirmed = rt.takeover->confirm(); !confirmed) {
      LOG_WARN("takeover: pid {} did not confirm ({}); serving anyway", rt.takeover->old_pid(),
               confirmed.error().message);
    } else {
      LOG_INFO("takeover: pid {} stopped accepting and drains", rt.takeover->old_pid());
    }
    rt.takeover.reset();
  }
  if (!settings_.takeover_socket.empty()) {
    auto listener = TakeoverListener::listen(service.main_loop(), settings_.takeover_socket);
    if (listener) {
      rt.listener = std::move(*listener);
    } else {
      // Without it this server still serves; only the next restart needs it.
      LOG_WARN("server.takeover_socket {}: {}; no takeover possible", settings_.takeover_socket,
               listener.error().message);
    }
  }

  // SIGHUP: the program's hook, then the TLS context rebuilt from the new configuration's
  // [tls] (its files read again), so that new connections get the new certificate and options.
  ReloadHook reload = [this](const Config& fresh) -> Result<void, Error> {
    if (reload_hook_) {
      if (auto applied = reload_hook_(fresh); !applied) return applied;
    }
    return reload_tls(fresh);
  };
  ConfigReloader reloader(*schema_, config_path_, overrides_, *config_, &reload);
  service.main_loop().spawn(
      watch_signals(rt.signal_fd.get(), SignalTarget{service, reloader, rt.stopping}));
  if (settings_.stats_interval.count() > 0 && service.tcp_server() != nullptr) {
    RequestCounter requests;
    if (service.requests()) requests = [&service] { return *service.requests(); };
    service.main_loop().spawn(
        log_stats(*service.tcp_server(), settings_.stats_interval, std::move(requests)));
  }
  if (rt.listener) {
    const auto timeout = std::chrono::milliseconds(settings_.server.shutdown_timeout_ms);
    TakeoverListener::Handover handover;
    handover.sockets = [&service] { return service.listening_fds(); };
    handover.refusal = [&rt] {
      return rt.stopping ? std::string("it is stopping") : std::string();
    };
    handover.handed_over = [&service, &rt, timeout](pid_t successor) {
      LOG_INFO(
          "takeover: pid {} serves the listening sockets now; draining {} connection(s) (at most "
          "server.shutdown_timeout_ms = {} ms)",
          successor, service.connection_count(), timeout.count());
      service.main_loop().spawn(drain_then_stop(service, rt.stopping, timeout));
    };
    service.main_loop().spawn(rt.listener->serve(std::move(handover)));
  }
  // A LoopService says where it listens itself, if it listens at all.
  if (const std::string where = service.listening(); !where.empty()) {
    LOG_INFO("listening on {}{}", where, rt.adopted_from);
  }
  service.run();
  rt.listener.reset();  // removes the path, unless a successor took it
  LOG_INFO("stopped cleanly");
  Logger::shutdown();
  return 0;
}

void Application::log_tls_start() const {
  const tls::TlsOptions& options = *settings_.tls;
  LOG_INFO(
      "tls: {} certificate(s) from {}; TLS {} to 1.3; ALPN {}; tickets {}; client "
      "certificates {}; handshake timeout {} ms",
      options.certificates.size(), options.certificates.front().certificate,
      options.min_version == tls::TlsVersion::k1_3 ? "1.3" : "1.2",
      options.alpn.empty() ? std::string("off") : config_->show("tls.alpn"),
      options.session_tickets ? "on" : "off", config_->show("tls.verify_client"),
      options.handshake_timeout_ms);
  // UCP seals and opens records itself: kTLS would hand that to the kernel (docs/tls.md).
  const tls::KernelTlsProbe ktls = tls::probe_kernel_tls();
  if (ktls.available) {
    LOG_INFO("tls: the kernel offers kTLS (the tls ULP); UCP does not use it yet");
  } else {
    LOG_INFO("tls: no kTLS in this kernel ({}): records are sealed and opened in user space",
             ktls.error.message());
  }
}

Result<void, Error> Application::reload_tls(const Config& fresh) {
  if (!runtime_->tls) return {};
  const auto options = tls_options(fresh);
  if (!options) {
    LOG_WARN("tls.enable: true -> false takes effect at the next start; TLS goes on");
    return {};
  }
  if (auto reloaded = runtime_->tls->reload(*options); !reloaded) return reloaded;
  LOG_INFO("tls: certificate files read again ({}), [tls] applied: new connections use them",
           options->certificates.front().certificate);
  return {};
}

int Application::usage_error(std::string_view what) const {
  std::fprintf(stderr, "%s: %.*s\n", program_.c_str(), static_cast<int>(what.size()), what.data());
  Logger::shutdown();
  return 2;
}

int Application::report_uncaught(const std::exception& error) noexcept {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) {
    std::fputs("out of memory at start-up (RLIMIT_AS, the overcommit policy or RAM)\n", stderr);
  } else {
    std::fprintf(stderr, "start-up failed: %s\n", error.what());
  }
  Logger::shutdown();
  return 1;
}

}  // namespace ucp::app
