#pragma once
// ServerMain: what every UCP server binary does around its server (SPEC-like contract of
// bin/proactor_test and bin/http_server), in one place:
//
//   ucp::app::ServerMain app("http_server");
//   if (auto exit_code = app.setup(argc, argv)) return *exit_code;   // usage, config, log
//   ucp::http::HttpServer server(app.server_options(), app.loop_options(), ...);
//   return app.serve(server.tcp(), "http");                           // start, run, stop
//
// - Command line: [CONFIG] [--set section.key=value]...; CONFIG defaults to config/ucp.conf.
// - Exit codes: 0 clean stop (also --help), 1 start-up failure (one line on stderr saying
//   what to do), 2 bad usage or config ("FILE:LINE: section.key: what is wrong").
// - Signals: SIGPIPE ignored; SIGINT/SIGTERM blocked in every thread and read from a
//   signalfd by the main loop, which then stops the server gracefully.
// - Logs "listening on IP:PORT" at INFO once the server accepts connections.
//
// Thread contract: the main thread, before any other thread starts (setup blocks signals
// for the threads created later).

#include <optional>
#include <string>
#include <string_view>

#include "ucp/base/UniqueFd.h"
#include "ucp/config/Config.h"
#include "ucp/net/TcpServer.h"

namespace ucp::app {

class ServerMain {
 public:
  explicit ServerMain(std::string program);

  /// Parses the command line, loads the config, sets up signals and the logger. Returns
  /// the exit code to leave with now, or nullopt to go on.
  std::optional<int> setup(int argc, char** argv);

  const Config& config() const noexcept { return config_; }
  ServerOptions server_options() const;
  LoopOptions loop_options() const;

  /// Starts `server`, runs it until SIGINT/SIGTERM and a graceful stop, shuts the logger
  /// down. Returns the exit code: 0, or 1 when the server could not start. `what` names the
  /// service in the start-up log line.
  int serve(TcpServer& server, std::string_view what);

  /// For a configuration error found after setup (a bad value only this program checks):
  /// prints "<program>: <what>" and returns 2.
  int usage_error(std::string_view what) const;

 private:
  std::string program_;
  Config config_;
  UniqueFd signal_fd_;
};

}  // namespace ucp::app
