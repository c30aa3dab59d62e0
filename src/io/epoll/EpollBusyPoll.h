#pragma once
// The epoll backend's share of event_loop.busy_poll_us: the kernel's NAPI busy poll for one
// epoll instance (EPIOCSPARAMS, 6.9+). With it, an epoll_wait that finds nothing ready polls
// the network devices' receive queues of the sockets it watches for `usecs` before it sleeps,
// as SO_BUSY_POLL does for one socket. Loopback has no device queue to poll: there, and on
// older kernels, the loop's own spin (EventLoop::busy_poll) is all there is.

#include <cstdint>

namespace ucp::detail {

/// True when the kernel took the setting.
bool set_epoll_busy_poll(int epoll_fd, uint32_t usecs) noexcept;

}  // namespace ucp::detail
