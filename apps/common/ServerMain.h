#pragma once
// ServerMain: what every UCP server binary does around its server, in one place:
//
//   int main(int argc, char** argv) {
//     return ucp::app::ServerMain::guarded("http_server", [&](ucp::app::ServerMain& app) {
//       if (auto exit_code = app.setup(argc, argv)) return *exit_code;  // usage, config, log
//       ucp::http::HttpServer server(app.server_options(), app.loop_options(), ...);
//       return app.serve(server, "http");                                // start, run, stop
//     });
//   }
//
// - Command line: [CONFIG] [--set section.key=value]... | --version | --help; CONFIG
//   defaults to config/ucp.conf.
// - Exit codes: 0 clean stop (also --help, --version), 1 start-up failure (one line on stderr
//   saying what to do and naming the key), 2 bad usage or config ("FILE:LINE: section.key:
//   what is wrong"). An allocation or thread the process cannot have at start-up is exit 1
//   with one line, never an uncaught exception (guarded).
// - Signals (Signals.h): blocked in every thread from the first line of setup and read from a
//   signalfd; SIGINT/SIGTERM stop gracefully (a second one at once), SIGUSR1 reopens the log,
//   SIGHUP reopens it and reloads the config; SIGPIPE ignored.
// - Socket activation: a listening socket passed by a service manager (LISTEN_FDS,
//   LISTEN_PID) is adopted instead of binding server.ip:server.port.
// - Logs the version, the start-up memory, the backend line of the worker loops, and
//   "listening on IP:PORT" at INFO once the server accepts connections; with
//   log.stats_interval_ms, one stats line per interval (StatsLog.h).
//
// Thread contract: the main thread, before any other thread starts (setup blocks signals
// for the threads created later).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/base/UniqueFd.h"
#include "ucp/config/Config.h"
#include "ucp/net/TcpServer.h"

#include "StatsLog.h"

namespace ucp::http {
class HttpServer;
}

namespace ucp::app {

/// A server ServerMain::serve can run other than a TcpServer (proactor_test's udp_echo): the
/// same life cycle. start() on the main thread, run() there until stop(); stop() and
/// stop_now() from the main loop (the signal watcher runs there).
class Service {
 public:
  virtual ~Service() = default;
  /// What failed, in one line; optional features the machine lacks go to `warnings`.
  virtual Result<void, Error> start(std::string* warnings) = 0;
  virtual void run() = 0;
  virtual void stop() noexcept = 0;
  virtual void stop_now() noexcept = 0;
  virtual EventLoop& main_loop() noexcept = 0;
  /// What the "listening on" line names: "127.0.0.1:8888 (udp)".
  virtual std::string listening() const = 0;
  virtual std::string describe_loops() const = 0;
  /// The TcpServer behind it, whose counters the stats line reads; null: no stats line.
  virtual TcpServer* tcp_server() noexcept { return nullptr; }
};

class ServerMain {
 public:
  explicit ServerMain(std::string program);

  /// Runs `body(app)` and turns what can still throw at start-up (an allocation, a thread) into
  /// one line on stderr and exit 1.
  template <class Body>
  static int guarded(std::string program, Body body) {
    try {
      ServerMain app(std::move(program));
      return body(app);
    } catch (const std::exception& e) {
      return report_uncaught(e);
    }
  }

  /// Parses the command line, blocks the signals, takes an inherited listening socket, loads
  /// the config and starts the logger. Returns the exit code to leave with now, or nullopt.
  std::optional<int> setup(int argc, char** argv);

  const Config& config() const noexcept { return config_; }
  ServerOptions server_options() const;
  LoopOptions loop_options() const;

  /// Starts `server`, runs it until a stop signal and a graceful stop, shuts the logger down.
  /// Returns the exit code: 0, or 1 when the server could not start. `what` names the service
  /// in the start-up log line; `requests` feeds the stats line's request count.
  int serve(TcpServer& server, std::string_view what, RequestCounter requests = {});
  /// The same for an HTTP server; the stats line counts its responses as requests.
  int serve(http::HttpServer& server, std::string_view what);
  /// The same for another kind of server. A socket passed by a service manager is refused
  /// (exit 2): it is a TCP listener.
  int serve(Service& service, std::string_view what);

  /// For a configuration error found after setup (a bad value only this program checks):
  /// prints "<program>: <what>" and returns 2.
  int usage_error(std::string_view what) const;

 private:
  static int report_uncaught(const std::exception& error) noexcept;
  int run_service(Service& service, std::string_view what, RequestCounter requests);

  std::string program_;
  std::string config_path_ = "config/ucp.conf";
  std::vector<std::string> overrides_;
  Config config_;
  UniqueFd signal_fd_;
  std::vector<UniqueFd> inherited_;  // a socket-activated listener, at most one
};

}  // namespace ucp::app
