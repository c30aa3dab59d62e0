#include "ucp/net/Socket.h"

#include <cerrno>

#include <netinet/tcp.h>
#include <sys/socket.h>

namespace ucp {

Result<UniqueFd> listen_on(const InetAddress& address, const ListenOptions& options) {
  auto fd = bind_listener(address, options);
  if (!fd) return fd;
  if (auto listening = start_listening(fd->get(), options); !listening) {
    return Unexpected{listening.error()};
  }
  return fd;
}

Result<void> start_listening(int fd, const ListenOptions& options) {
  if (::listen(fd, static_cast<int>(options.backlog)) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  return {};
}

Result<UniqueFd> bind_listener(const InetAddress& address, const ListenOptions& options) {
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd) return Unexpected{error_from_errno(errno)};
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (options.reuse_port && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  if (::bind(fd.get(), address.get(), address.length()) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  return fd;
}

Result<UniqueFd> open_tcp_socket(int family) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd) return Unexpected{error_from_errno(errno)};
  return fd;
}

void set_linger_reset(int fd) noexcept {
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
}

void set_tcp_nodelay(int fd, bool on) noexcept {
  int value = on ? 1 : 0;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, sizeof value);
}

}  // namespace ucp
