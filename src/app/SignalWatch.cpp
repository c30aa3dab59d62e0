#include "SignalWatch.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ucp/io/Operations.h"
#include "ucp/log/Logger.h"

namespace ucp::app {

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, signal);
  return set;
}

UniqueFd block_handled_signals() {
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set = handled_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return UniqueFd(::signalfd(-1, &set, SFD_CLOEXEC));
}

std::string signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation : std::to_string(signal);
}

namespace {

bool is_stop_signal(int signal) noexcept { return signal == SIGINT || signal == SIGTERM; }

}  // namespace

bool ConfigReloader::applies(const std::string& changed_key) const {
  if (changed_key.front() == '[') {  // a family instance came or went: "[upstream.b]"
    const SectionSchema* family =
        schema_.find_section(changed_key.substr(1, changed_key.find('.') - 1));
    return family != nullptr && std::all_of(family->keys().begin(), family->keys().end(),
                                            [](const KeySchema& k) { return k.is_reloadable(); });
  }
  const KeySchema* key = schema_.find_key(changed_key);
  return key != nullptr && key->is_reloadable();
}

void ConfigReloader::reload() {
  // The log file first, so that what follows lands in the new one.
  Logger::reopen();
  auto loaded = Config::load(schema_, path_, overrides_);
  if (!loaded) {
    LOG_ERROR("signal 1 (SIGHUP): log file reopened; {}; keeping the running configuration",
              loaded.error().message("; "));
    return;
  }
  const Config& fresh = *loaded;
  if (hook_ != nullptr && *hook_) {
    if (auto applied = (*hook_)(fresh); !applied) {
      LOG_ERROR(
          "signal 1 (SIGHUP): log file reopened; {} read again: {}; keeping the running "
          "configuration",
          fresh.source(), applied.error().message);
      return;
    }
  }
  auto changes = Config::changes(running_, fresh);
  if (changes.empty()) {
    LOG_INFO("signal 1 (SIGHUP): log file reopened; {} read again: no change", fresh.source());
    return;
  }
  LOG_INFO("signal 1 (SIGHUP): log file reopened; {} read again: {} change(s)", fresh.source(),
           changes.size());
  for (const ConfigChange& change : changes) {
    if (change.key == "log.level") {
      Logger::set_level(parse_log_level(change.to).value_or(LogLevel::kInfo));
    }
    LOG_WARN("{}: {} -> {} ({})", change.key, change.from, change.to,
             applies(change.key) ? "applied" : "takes effect at the next start");
  }
  running_.take_reloadable(fresh);
}

Task<> watch_signals(int signal_fd, SignalTarget target) {
  EventLoop& loop = target.service.main_loop();
  for (;;) {
    signalfd_siginfo info{};
    auto n = co_await io::read(loop, signal_fd, std::as_writable_bytes(std::span(&info, 1)));
    if (!n || *n != sizeof info) co_return;  // the loop is stopping: the read was cancelled
    const int signal = static_cast<int>(info.ssi_signo);
    const std::string name = signal_name(signal);
    if (is_stop_signal(signal) && !target.stopping) {
      target.stopping = true;
      LOG_INFO("signal {} ({}) received: stopping gracefully (the same signal again stops at once)",
               signal, name);
      target.service.stop();
    } else if (is_stop_signal(signal)) {
      LOG_WARN("signal {} ({}) again: stopping at once", signal, name);
      target.service.stop_now();
    } else if (signal == SIGUSR1) {
      Logger::reopen();
      LOG_INFO("signal {} ({}): log file reopened", signal, name);
    } else if (signal == SIGHUP) {
      target.reloader.reload();
    } else {
      LOG_INFO("signal {} ({}) ignored", signal, name);
    }
  }
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
    const std::string name = signal_name(signal);
    if (is_stop_signal(signal)) {
      LOG_INFO("signal {} ({}) during start-up: exiting", signal, name);
      Logger::shutdown();  // writes and flushes every record so far
      std::_Exit(0);       // the workers being set up go with the process; nothing is served
    }
    if (signal == SIGUSR1 || signal == SIGHUP) {
      Logger::reopen();
      LOG_INFO("signal {} ({}) during start-up: log file reopened", signal, name);
    } else {
      LOG_INFO("signal {} ({}) during start-up: ignored", signal, name);
    }
  }
}

}  // namespace ucp::app
