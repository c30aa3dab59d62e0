#include "EpollBusyPoll.h"

#include <linux/ioctl.h>
#include <sys/ioctl.h>

namespace ucp::detail {

bool set_epoll_busy_poll(int epoll_fd, uint32_t usecs) noexcept {
  // Debian 12's kernel headers (6.1) predate EPIOCSPARAMS: its argument and number, from the
  // kernel's uapi <linux/eventpoll.h>, are stable ABI.
  struct EpollParams {
    uint32_t busy_poll_usecs;
    uint16_t busy_poll_budget;  // 0: the kernel's default (a larger one needs CAP_NET_ADMIN)
    uint8_t prefer_busy_poll;
    uint8_t pad;
  } params{usecs, 0, 0, 0};
  static_assert(sizeof(EpollParams) == 8);
  constexpr unsigned long kSetParams = _IOW(0x8A, 0x01, EpollParams);
  return ::ioctl(epoll_fd, kSetParams, &params) == 0;
}

}  // namespace ucp::detail
