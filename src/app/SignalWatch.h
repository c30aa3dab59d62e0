#pragma once
// How a UCP server takes signals (nginx's conventions where they apply):
//
//   SIGINT, SIGTERM  graceful stop; the same signal again during it stops at once (exit 0)
//   SIGUSR1          reopen the log file (logrotate moves it away, then sends SIGUSR1)
//   SIGHUP           reopen the log file and read the configuration again: log.level and the
//                    keys the program applies (Application::on_reload) take effect at once,
//                    every other change is logged as taking effect at the next start; a
//                    configuration that no longer loads, or that the program refuses, is
//                    logged as one ERROR line and the running one kept
//   SIGUSR2          logged and ignored (a restart is a takeover: --takeover PATH)
//   SIGPIPE          ignored (sends also use MSG_NOSIGNAL)
//
// Every one of them except SIGPIPE is blocked in all threads (block_handled_signals runs
// first in main, before any thread exists, so each inherits the mask) and read from one
// signalfd: nothing runs in signal context, and none can kill the process by its default
// action. While the server starts, its rings do not run yet, so a StartupSignalWatch thread
// reads the signalfd; once the server runs, watch_signals does, on the main loop.
//
// Private to src/app.

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "ucp/app/Application.h"
#include "ucp/app/Config.h"
#include "ucp/app/Service.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"

namespace ucp::app {

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
  /// `path` and `overrides` as given on the command line; `running` is what they gave at
  /// start; `hook` (may be empty) is the program's.
  ConfigReloader(const ConfigSchema& schema, std::string path, std::vector<std::string> overrides,
                 Config running, Application::ReloadHook* hook)
      : schema_(schema),
        path_(std::move(path)),
        overrides_(std::move(overrides)),
        running_(std::move(running)),
        hook_(hook) {}

  /// Reopens the log file, then reads the configuration again and logs the outcome: each
  /// changed key with both values, "(applied)" for the reloadable ones, "(takes effect at the
  /// next start)" for the rest (WARN); or the problems and "keeping the running configuration"
  /// (one ERROR line). Blocking file I/O on the calling thread: a config file is at most 1 MiB.
  void reload();

 private:
  bool applies(const std::string& changed_key) const;

  const ConfigSchema& schema_;
  std::string path_;
  std::vector<std::string> overrides_;
  Config running_;  // what the server runs with: the start, plus the reloadable keys since
  Application::ReloadHook* hook_;
};

/// What the signal watcher acts on. Main loop thread.
struct SignalTarget {
  Service& service;
  ConfigReloader& reloader;
  bool& stopping;  // a stop has begun (a signal, or the end of a takeover's drain)
};

/// Reads the signalfd on the service's main loop until the loop stops, and acts on each
/// signal as the table above says.
Task<> watch_signals(int signal_fd, SignalTarget target);

/// Reads the signalfd on its own thread while the server starts. A stop signal ends the
/// process at once with exit 0: nothing is served yet, so there is nothing to drain, and
/// waiting for hundreds of workers to start first would ignore the operator for seconds.
/// The line "signal 15 (SIGTERM) during start-up: exiting" is logged and the log flushed
/// first. SIGUSR1 and SIGHUP reopen the log file (the configuration is being applied
/// already); SIGUSR2 is ignored.
///
/// Owned by the runtime; finish() (or the destructor) ends the thread before the main loop
/// starts reading the same fd.
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
