#pragma once
// connect_upstream(): a connection to a server of a group, for one client. It picks a server
// (the group's balance, skipping ejected and failing ones), connects within connect_timeout_ms,
// and when that fails reports the failure (passive health) and tries another server, up to
// connect_tries servers, never one twice. A failure of this process rather than the server's
// (out of fds, memory or local ports; the loop stopping) is returned at once, counted against
// no server.
//
//   auto upstream = co_await connect_upstream(loop, group, client_address);
//   if (!upstream) ...   // ProxyErrc::kNoServer: nothing available (HTTP 503); timed_out (504);
//                        // connection_refused and the like: every server tried failed (502)
//   co_await relay(client, *upstream->connection, ...);
//
// Thread contract: the worker's loop thread; `group` is that worker's.

#include <cstdint>
#include <system_error>
#include <type_traits>

#include "ucp/base/Result.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/TcpClient.h"
#include "ucp/proxy/UpstreamGroup.h"

namespace ucp::proxy {

enum class ProxyErrc : int {
  kNoServer = 1,  // no server of the group is available (all ejected or down, none resolved)
};
const std::error_category& proxy_category() noexcept;
inline std::error_code make_error_code(ProxyErrc e) noexcept {
  return {static_cast<int>(e), proxy_category()};
}

/// The most servers one client connection tries (connect_tries is capped here).
inline constexpr uint32_t kMaxConnectTries = 8;

struct UpstreamConnection {
  ClientConnection connection;
  PeerLease peer;         // the server: counted active until dropped
  uint32_t attempts = 0;  // servers tried, this one included
};

/// One connect to `peer` of `group`, as connect_upstream makes each: within connect_timeout_ms,
/// output failing after idle_timeout_ms without progress, and the outcome reported to the
/// group's passive health (a failure of this process's own, local_failure(), to no server).
Task<Result<ClientConnection>> connect_peer(EventLoop& loop, GroupRef group, PeerState& peer,
                                            StopToken stop = {});

/// A failure of this process rather than the server's: out of fds, memory or local ports, the
/// loop short of room or stopping. It says nothing about the server, and another would fail
/// the same way.
bool local_failure(std::error_code error) noexcept;

/// Connects to a server of `group` for a client at `client` (the hash balance's key). The
/// connection has no read timeout, and its output fails after the group's idle_timeout_ms
/// without progress. `stop` cancels the attempt in progress (operation_canceled).
Task<Result<UpstreamConnection>> connect_upstream(EventLoop& loop, GroupRef group,
                                                  InetAddress client, StopToken stop = {});

}  // namespace ucp::proxy

template <>
struct std::is_error_code_enum<ucp::proxy::ProxyErrc> : std::true_type {};
