#pragma once
// Minimal futex wait/wake on a std::atomic<uint32_t>. The logger's threads sleep only on
// slow paths (an idle background thread, a full queue, an ERROR waiting for its flush);
// a futex lets the fast path wake a sleeper without any lock.

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ucp::detail {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

/// Sleeps while `word == expected`, at most `timeout_ns` (spurious returns are allowed).
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int64_t timeout_ns) {
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(timeout_ns / 1000000000);
  timeout.tv_nsec = static_cast<long>(timeout_ns % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &timeout,
            nullptr, 0);
}

/// Wakes up to `count` threads sleeping on `word`.
inline void futex_wake(std::atomic<uint32_t>& word, int count = INT_MAX) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
}

}  // namespace ucp::detail
