#include "Sigpipe.h"

#include <atomic>
#include <csignal>

namespace ucp::detail {

void ignore_default_sigpipe() noexcept {
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_relaxed)) return;
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  done.store(true, std::memory_order_relaxed);
}

}  // namespace ucp::detail
