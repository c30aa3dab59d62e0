#include "ucp/tls/KernelTls.h"

#include <cerrno>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "ucp/base/UniqueFd.h"

#ifndef TCP_ULP
#define TCP_ULP 31  // linux/tcp.h; older libc headers lack it
#endif

namespace ucp::tls {
namespace {

KernelTlsProbe failed() noexcept { return {false, std::error_code(errno, std::system_category())}; }

}  // namespace

KernelTlsProbe probe_kernel_tls() noexcept {
  // The tls ULP attaches to an established TCP socket only: make one over loopback.
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) return failed();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return failed();
  }
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!client) return failed();
  if (::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return failed();
  }
  UniqueFd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!server) return failed();
  static constexpr char kTls[] = "tls";
  if (::setsockopt(client.get(), SOL_TCP, TCP_ULP, kTls, sizeof kTls - 1) != 0) return failed();
  return {true, {}};
}

}  // namespace ucp::tls
