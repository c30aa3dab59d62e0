#include "ucp/net/SocketActivation.h"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ucp {

namespace {

// A whole positive decimal number, as systemd writes it; anything else is malformed.
bool parse_positive(const char* text, long& value) {
  const char* end = text + std::strlen(text);
  auto [next, error] = std::from_chars(text, end, value);
  return error == std::errc() && next == end && next != text && value > 0;
}

Result<std::vector<UniqueFd>> take_from_environment() {
  const char* pid_text = std::getenv("LISTEN_PID");
  if (pid_text == nullptr) return std::vector<UniqueFd>{};
  long pid = 0;
  if (!parse_positive(pid_text, pid))
    return Unexpected{std::make_error_code(std::errc::invalid_argument)};
  if (pid != static_cast<long>(::getpid())) return std::vector<UniqueFd>{};  // for another process

  const char* count_text = std::getenv("LISTEN_FDS");
  if (count_text == nullptr) return std::vector<UniqueFd>{};
  long count = 0;
  if (!parse_positive(count_text, count) || count > INT_MAX - kFirstInheritedFd) {
    return Unexpected{std::make_error_code(std::errc::invalid_argument)};
  }
  const int end = kFirstInheritedFd + static_cast<int>(count);
  // Check every fd before taking any, so that a bad count never closes fds we do not own.
  for (int fd = kFirstInheritedFd; fd < end; ++fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) return Unexpected{error_from_errno(errno)};
    if ((flags & FD_CLOEXEC) == 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
      return Unexpected{error_from_errno(errno)};
    }
  }
  std::vector<UniqueFd> fds;
  fds.reserve(static_cast<size_t>(count));
  for (int fd = kFirstInheritedFd; fd < end; ++fd) fds.emplace_back(fd);
  return fds;
}

}  // namespace

Result<std::vector<UniqueFd>> take_inherited_listen_fds() {
  auto fds = take_from_environment();
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  return fds;
}

Result<void> check_listening_tcp_socket(int fd) {
  auto option = [fd](int level, int name, int& value) {
    socklen_t length = sizeof value;
    return ::getsockopt(fd, level, name, &value, &length) == 0;
  };
  int type = 0;
  if (!option(SOL_SOCKET, SO_TYPE, type)) return Unexpected{error_from_errno(errno)};
  int domain = 0;
  if (!option(SOL_SOCKET, SO_DOMAIN, domain)) return Unexpected{error_from_errno(errno)};
  if (domain != AF_INET && domain != AF_INET6) {
    return Unexpected{std::make_error_code(std::errc::address_family_not_supported)};
  }
  int protocol = 0;
  if (type != SOCK_STREAM || !option(SOL_SOCKET, SO_PROTOCOL, protocol) ||
      protocol != IPPROTO_TCP) {
    return Unexpected{std::make_error_code(std::errc::wrong_protocol_type)};
  }
  int listening = 0;
  if (!option(SOL_SOCKET, SO_ACCEPTCONN, listening)) return Unexpected{error_from_errno(errno)};
  if (listening == 0) return Unexpected{std::make_error_code(std::errc::invalid_argument)};
  return {};
}

}  // namespace ucp
