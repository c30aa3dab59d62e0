#pragma once
// How bin/proactor_test takes signals. Every signal it handles is blocked in all threads
// (block_handled_signals runs first in main, before any thread exists, so each inherits the
// mask) and read from one signalfd instead: nothing runs in signal context, and a signal
// can never kill the process by its default action.
//
// While the server starts (workers being created, buffers mapped) its rings do not run yet,
// so a StartupSignalWatch thread reads the signalfd; once the server runs, the main loop
// reads it (watch_signals in main.cpp).

#include <csignal>
#include <thread>

#include "ucp/base/UniqueFd.h"

namespace ucp::app {

/// The signals the server handles: SIGINT, SIGTERM (stop).
sigset_t handled_signals();

/// Blocks handled_signals() in the calling thread (and so in every thread it starts later),
/// ignores SIGPIPE, and returns a signalfd that reads them (blocking reads). Signals raised
/// before the call stay pending and are read from the fd.
UniqueFd block_handled_signals();

/// True for the signals that stop the server.
inline bool is_stop_signal(int signal) noexcept { return signal == SIGINT || signal == SIGTERM; }

/// Reads the signalfd on its own thread while the server starts. A stop signal ends the
/// process at once with exit 0: nothing is served yet, so there is nothing to drain, and
/// waiting for hundreds of workers to start first would ignore the operator for seconds.
/// The line "signal N (NAME) during start-up: exiting" is logged and the log flushed first.
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
