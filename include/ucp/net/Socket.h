#pragma once
// Socket helpers: the few synchronous calls that set a socket up (bind, listen, options).
// Everything that waits goes through io/Operations.h instead.

#include <cstdint>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#include "ucp/net/InetAddress.h"

namespace ucp {

struct ListenOptions {
  uint32_t backlog = 4096;
  bool reuse_port = false;  // off by default: it lets a second live server bind the same port
};

/// socket + SO_REUSEADDR (+ SO_REUSEPORT) + bind + listen. EADDRINUSE means the port is taken.
Result<UniqueFd> listen_on(const InetAddress& address, const ListenOptions& options);
/// TCP_NODELAY: pingpong traffic must not wait for Nagle.
void set_tcp_nodelay(int fd, bool on) noexcept;

}  // namespace ucp
