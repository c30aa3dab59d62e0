#pragma once
// How UCP's server binaries (bin/proactor_test, bin/http_server) take signals (nginx's
// conventions where they apply):
//
//   SIGINT, SIGTERM  graceful stop; the same signal again during it stops at once (exit 0)
//   SIGUSR1          reopen the log file (logrotate moves it away, then sends SIGUSR1)
//   SIGHUP           reopen the log file and read the configuration again: log.level takes
//                    effect at once, every other change is logged as taking effect at the
//                    next start; a configuration that no longer loads is logged and ignored
//   SIGUSR2          logged and ignored (nginx's binary upgrade has no equivalent here)
//   SIGPIPE          ignored (sends also use MSG_NOSIGNAL)
//
// Every one of them except SIGPIPE is blocked in all threads (block_handled_signals runs
// first in main, before any thread exists, so each inherits the mask) and read from one
// signalfd: nothing runs in signal context, and none can kill the process by its default
// action. While the server starts, its rings do not run yet, so a StartupSignalWatch thread
// reads the signalfd; once the server runs, watch_signals does, on the main loop.

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "ucp/base/UniqueFd.h"
#include "ucp/config/Config.h"
#include "ucp/coro/Task.h"
#include "ucp/net/TcpServer.h"

namespace ucp::app {

class Service;

/// The signals read from the signalfd: SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2.
sigset_t handled_signals();

/// Blocks handled_signals() in the calling thread (and so in every thread it starts later),
/// ignores SIGPIPE, and returns a signalfd that reads them (blocking reads). Signals raised
/// before the call stay pending and are read from the fd.
UniqueFd block_handled_signals();

/// "SIGTERM".
std::string signal_name(int signal);

/// What SIGHUP does once the server runs. Main loop thread only.
class ConfigReloader {
 public:
  /// `path` and `overrides` as given on the command line; `running` is what they gave at start.
  ConfigReloader(std::string path, std::vector<std::string> overrides, Config running)
      : path_(std::move(path)), overrides_(std::move(overrides)), running_(std::move(running)) {}

  /// Reopens the log file, then reads the configuration again and logs the outcome: each
  /// changed key with both values, "(applied)" for log.level, "(takes effect at the next
  /// start)" for the rest (WARN); or the config error and "keeping the running configuration"
  /// (ERROR). Blocking file I/O on the calling thread: a config file is at most 1 MiB.
  void reload();

 private:
  std::string path_;
  std::vector<std::string> overrides_;
  Config running_;  // what the server runs with (log.level follows reloads)
};

/// Reads the signalfd on the server's main loop until the loop stops, and acts on each
/// signal as the table above says (ServerMain.h: Service).
Task<> watch_signals(Service& server, int signal_fd, ConfigReloader& reloader);

/// Reads the signalfd on its own thread while the server starts. A stop signal ends the
/// process at once with exit 0: nothing is served yet, so there is nothing to drain, and
/// waiting for hundreds of workers to start first would ignore the operator for seconds.
/// The line "signal 15 (SIGTERM) during start-up: exiting" is logged and the log flushed
/// first. SIGUSR1 and SIGHUP reopen the log file (the configuration is being applied
/// already); SIGUSR2 is ignored.
///
/// Owned by main; finish() (or the destructor) ends the thread before the main loop starts
/// reading the same fd.
class StartupSignalWatch {
 public:
  explicit StartupSignalWatch(int signal_fd);
  StartupSignalWatch(const StartupSignalWatch&) = delete;
  StartupSignalWatch& operator=(const StartupSignalWatch&) = delete;
  ~StartupSignalWatch() { finish(); }

  /// Stops watching; returns once the thread has ended. Signals not read yet stay pending.
  void finish() noexcept;

 private:
  void run() noexcept;

  int signal_fd_;
  UniqueFd done_fd_;  // eventfd: finish() writes it to end the thread's poll
  std::thread thread_;
};

}  // namespace ucp::app
