#pragma once
// Socket helpers: the few synchronous calls that set a socket up (bind, listen, options).
// Everything that waits goes through io/Operations.h instead.

#include <cstdint>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/net/InetAddress.h"

namespace ucp {

struct ListenOptions {
  uint32_t backlog = defaults::kBacklog;
  bool reuse_port = defaults::kReusePort;
};

/// socket + SO_REUSEADDR (+ SO_REUSEPORT) + bind + listen. EADDRINUSE means the port is taken.
Result<UniqueFd> listen_on(const InetAddress& address, const ListenOptions& options);
/// listen_on() without the listen: the address is taken (and a port 0 chosen), but a client
/// that connects is refused until start_listening(). For a server that has more to set up
/// before it can serve.
Result<UniqueFd> bind_listener(const InetAddress& address, const ListenOptions& options);
/// listen(2) on a socket bind_listener() made.
Result<void> start_listening(int fd, const ListenOptions& options);
/// A TCP socket of `family` (AF_INET, AF_INET6) to connect with: non-blocking and close-on-exec
/// (io_uring and epoll both complete a connect on it; an exec'd child never inherits it).
Result<UniqueFd> open_tcp_socket(int family);
/// TCP_NODELAY: pingpong traffic must not wait for Nagle.
void set_tcp_nodelay(int fd, bool on) noexcept;
/// SO_LINGER {on, 0}: closing resets the connection (RST) instead of FIN + TIME_WAIT. For load
/// generators that open and close tens of thousands of connections a second: an orderly close
/// would use up the ephemeral ports in TIME_WAIT within seconds.
void set_linger_reset(int fd) noexcept;

}  // namespace ucp
