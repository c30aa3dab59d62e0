#include "Signals.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ucp/log/Logger.h"

namespace ucp::app {

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM}) sigaddset(&set, signal);
  return set;
}

UniqueFd block_handled_signals() {
  // SIGPIPE must never kill the server (sends also use MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set = handled_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return UniqueFd(::signalfd(-1, &set, SFD_CLOEXEC));
}

StartupSignalWatch::StartupSignalWatch(int signal_fd)
    : signal_fd_(signal_fd), done_fd_(::eventfd(0, EFD_CLOEXEC)) {
  thread_ = std::thread([this] { run(); });
}

void StartupSignalWatch::finish() noexcept {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(done_fd_.get(), &one, sizeof one);
  thread_.join();
}

void StartupSignalWatch::run() noexcept {
  ::pthread_setname_np(::pthread_self(), "ucp-startsig");
  for (;;) {
    pollfd fds[2] = {{done_fd_.get(), POLLIN, 0}, {signal_fd_, POLLIN, 0}};
    int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (fds[0].revents & POLLIN) != 0) return;  // the server runs: done
    if ((fds[1].revents & POLLIN) == 0) continue;
    signalfd_siginfo info{};
    if (::read(signal_fd_, &info, sizeof info) != sizeof info) continue;
    const int signal = static_cast<int>(info.ssi_signo);
    if (!is_stop_signal(signal)) continue;
    LOG_INFO("signal {} ({}) during start-up: exiting", signal, sigabbrev_np(signal));
    Logger::shutdown();  // writes and flushes every record so far
    std::_Exit(0);       // the workers being set up go with the process; nothing is served yet
  }
}

}  // namespace ucp::app
