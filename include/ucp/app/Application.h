#pragma once
// Application: the runtime of a UCP server program. It does around the server what every
// server does, so that main() holds only what is the program's own (docs/app.md):
//
//   int main(int argc, char** argv) {
//     ucp::app::Application app("hello");
//     app.schema().section("hello").text("greeting", "Hello", "what GET /hello/{name} says");
//     if (auto exit_code = app.setup(argc, argv)) return *exit_code;
//     const std::string greeting = app.config().get<std::string>("hello.greeting");
//     ucp::http::HttpServer server(app.server_options(), app.loop_options(), app.http_options());
//     server.router().get("/hello/{name}", [&](auto& req, auto& res) -> ucp::Task<> {
//       res.body_buffer() = greeting + ", " + std::string(req.param("name")) + "!\n";
//       co_return;
//     });
//     return app.serve(server);
//   }
//
// - Command line: [CONFIG] [--set section.key=value]... [--takeover PATH] | --check-config
//   [CONFIG] [--set ...] | --help | --version. Without CONFIG the file set by
//   set_default_config_path() is read (none: defaults and --set only).
// - Config (ucp/app/Config.h): the library's sections (ucp/app/ServerSections.h) and the
//   program's own, declared on schema() before setup(). Every problem is reported, one line
//   each ("FILE:LINE: section.key: what is wrong"), then exit 2. --help lists every key with
//   its type, default and help; --check-config loads and checks, prints "CONFIG: ok", exits 0.
// - Exit codes: 0 clean stop (also --help, --version, --check-config of a valid file), 1
//   start-up failure (one line on stderr saying what to do), 2 bad usage or config.
// - Signals, blocked in every thread from the first line of setup() and read from a signalfd
//   on the main loop: SIGINT/SIGTERM stop gracefully (server.shutdown_timeout_ms), the same
//   again stops at once; SIGHUP reopens the log and reloads the config (log.level and the
//   keys the program applies through on_reload take effect, and [tls]'s certificate files
//   are read again for new connections; a config that no longer loads (a TLS file that is
//   missing, unreadable or does not match), or that the hook refuses, is logged as one ERROR
//   line and the running one kept); SIGUSR1
//   reopens the log (logrotate); SIGUSR2 is ignored; SIGPIPE ignored.
// - Socket activation: a listening socket passed by a service manager (LISTEN_FDS,
//   LISTEN_PID) is adopted instead of binding server.ip:server.port.
// - Takeover (zero-downtime restart): with server.takeover_socket set, the running server
//   waits there for a successor; a new process started with --takeover PATH receives the
//   listening sockets over that unix socket (SCM_RIGHTS), starts serving on them, and the
//   old one stops accepting, drains (HTTP answers carry Connection: close) and exits 0.
// - Logs the version, the start-up memory, the loops, and "listening on IP:PORT" once
//   serving; with log.stats_interval_ms one stats line per interval.
//
// Thread contract: the main thread, before any other thread starts (setup() blocks the signals
// for the threads created later). The reload hook runs on the main loop's thread.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/app/Config.h"
#include "ucp/app/ConfigSchema.h"
#include "ucp/app/ServerSections.h"
#include "ucp/app/Service.h"
#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/http/HttpServer.h"
#include "ucp/log/LogSink.h"
#include "ucp/net/TcpServer.h"

namespace ucp::app {

/// The runtime of one server program: owns the schema, the loaded configuration, the signal
/// fd and the takeover state. One per process, on the main thread (see above).
class Application {
 public:
  /// Called on SIGHUP with the configuration read again (valid by the schema). Apply what can
  /// change while running (keys declared reloadable(), files they name), or return an Error
  /// saying why `fresh` cannot be used: the running configuration is then kept.
  using ReloadHook = UniqueFunction<Result<void, Error>(const Config& fresh)>;

  /// `program` names it in messages, --version and the log. Declares the library's sections.
  explicit Application(std::string program);
  Application(const Application&) = delete;
  Application& operator=(const Application&) = delete;
  ~Application();

  /// Runs `body(app)` and turns what can still throw at start-up (an allocation, a thread)
  /// into one line on stderr and exit 1, instead of std::terminate.
  template <class Body>
  static int guarded(std::string program, Body body) {
    try {
      Application app(std::move(program));
      return body(app);
    } catch (const std::exception& e) {
      return report_uncaught(e);
    }
  }

  // ---- before setup() ----

  /// Declare the program's sections and keys here (and its defaults of library keys:
  /// schema().set_defaults({"server.port=9000"})).
  ConfigSchema& schema() noexcept { return *schema_; }
  /// The CONFIG read when the command line names none; empty (the default): no file.
  void set_default_config_path(std::string path) { default_config_ = std::move(path); }
  /// Changes the loop options the config gives, for the workers and the memory check.
  void adjust_loop_options(LoopAdjustment adjust) { adjust_ = std::move(adjust); }
  void on_reload(ReloadHook hook) { reload_hook_ = std::move(hook); }
  /// A sink of the program's own (ucp/log/LogSink.h) beside the [log] file and console; before
  /// setup(), which starts the logger with it.
  void add_log_sink(std::shared_ptr<LogSink> sink) { log_sinks_.push_back(std::move(sink)); }

  /// Parses the command line, blocks the signals, takes inherited or taken-over listening
  /// sockets, loads the config and starts the logger. Returns the exit code to leave with now
  /// (--help, --version, --check-config, an error), or nullopt to go on.
  std::optional<int> setup(int argc, char** argv);

  // ---- after setup() ----

  /// The configuration loaded at start (never changed: a reload hands the hook a new one).
  const Config& config() const noexcept { return *config_; }
  const ServerSettings& settings() const noexcept { return settings_; }
  /// [server] as ServerOptions, with the inherited or taken-over listening sockets.
  ServerOptions server_options() const;
  LoopOptions loop_options() const;
  http::HttpOptions http_options() const { return settings_.http; }
  const std::string& program() const noexcept { return program_; }

  /// Starts `server`, runs it until a stop (signal, takeover) and a graceful stop, shuts the
  /// logger down. Returns the exit code: 0, or 1 when the server could not start. `what`
  /// names the service in the start-up line.
  int serve(TcpServer& server, std::string_view what = "tcp");
  /// The same for an HTTP server: the stats line counts its responses, a takeover drains it
  /// with Connection: close.
  int serve(http::HttpServer& server, std::string_view what = "http");
  /// The same for another kind of server (a LoopService, your own Service). Such a service
  /// binds its own sockets: one passed by a service manager, or taken over, is refused (exit
  /// 2). It can still hand its sockets to a successor (Service::listening_fds).
  int serve(Service& service, std::string_view what);

  /// For a configuration error found after setup (a check only this program makes): prints
  /// "<program>: <what>" and returns 2.
  int usage_error(std::string_view what) const;

 private:
  struct Runtime;
  static int report_uncaught(const std::exception& error) noexcept;
  std::optional<int> parse_command_line(int argc, char** argv);
  void log_tls_start() const;
  Result<void, Error> reload_tls(const Config& fresh);
  int run_service(Service& service, std::string_view what, bool adopts_sockets);

  std::string program_;
  std::unique_ptr<ConfigSchema> schema_;
  std::string default_config_;
  std::string config_path_;
  bool have_config_path_ = false;
  std::vector<std::string> overrides_;
  bool check_only_ = false;
  std::string takeover_from_;  // --takeover PATH
  LoopAdjustment adjust_;
  ReloadHook reload_hook_;
  std::optional<Config> config_;
  ServerSettings settings_;
  std::vector<std::shared_ptr<LogSink>> log_sinks_;
  std::unique_ptr<Runtime> runtime_;  // signals, adopted sockets, the takeover in progress
};

}  // namespace ucp::app
