#pragma once
// What an upstream group is made of: its servers and how a proxy balances, checks and reaches
// them. Plain values, filled by a program or parsed from the config's text forms:
//
//   auto servers = ucp::proxy::parse_servers("10.0.0.7:8080 weight=3, app2.internal:8080");
//   ucp::proxy::UpstreamGroupOptions group;
//   group.name = "app";
//   group.servers = std::move(*servers);
//   group.balance = ucp::proxy::Balance::kLeastConn;
//   if (auto bad = ucp::proxy::validate(group); !bad) ...   // one line naming what is wrong
//
// The text forms are those of the gateway's [upstream.NAME] sections (docs/gateway.md).
//
// Thread contract: values; any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"

namespace ucp::proxy {

/// One configured server: a numeric address or a host name (resolved without blocking a loop,
/// and again every resolve_interval_ms), a port and a weight.
struct ServerSpec {
  std::string host;  // "10.0.0.7", "::1" (written "[::1]:80" in text), "app.internal"
  uint16_t port = 0;
  uint32_t weight = 1;  // 1..kMaxWeight
  friend bool operator==(const ServerSpec&, const ServerSpec&) = default;
};

/// How a connection's server is chosen among those available (not ejected, not down).
enum class Balance : uint8_t {
  kRoundRobin,  // smooth weighted round robin, as nginx's
  kLeastConn,   // fewest active connections per unit of weight; ties in weighted turn
  kHash,        // consistent hash (Maglev) of the client's IP address: a client sticks to a server
};

enum class HealthCheckKind : uint8_t {
  kNone,
  kTcp,   // a connect that succeeds within the timeout
  kHttp,  // GET path answered with a 2xx status line within the timeout
};

/// Active health checks: run by one thread for the whole process, every interval_ms.
struct HealthCheckOptions {
  HealthCheckKind kind = HealthCheckKind::kNone;
  std::string path = "/";  // kHttp
  uint32_t interval_ms = defaults::kHealthIntervalMs;
  uint32_t timeout_ms = 0;                // connect + answer; 0 = connect_timeout_ms
  uint32_t rise = defaults::kHealthRise;  // consecutive passes that bring a server back
  uint32_t fall = defaults::kHealthFall;  // consecutive failures that take it out
  friend bool operator==(const HealthCheckOptions&, const HealthCheckOptions&) = default;
};

/// The PROXY protocol header a proxy sends to its upstreams before any relayed byte.
enum class ProxyProtocolVersion : uint8_t { kOff, kV1, kV2 };

struct UpstreamGroupOptions {
  std::string name;
  std::vector<ServerSpec> servers;
  Balance balance = Balance::kRoundRobin;
  uint32_t connect_timeout_ms = defaults::kUpstreamConnectTimeoutMs;
  /// A relayed connection on which no byte moved either way for this long is closed (and
  /// output a peer takes no byte of for this long fails). 0 = never.
  uint32_t idle_timeout_ms = defaults::kUpstreamIdleTimeoutMs;
  /// A relayed connection is closed this long after it began, busy or not. 0 = never.
  uint32_t total_timeout_ms = defaults::kUpstreamTotalTimeoutMs;
  /// Passive health: this many consecutive failed connects to a server eject it from every
  /// worker's choice for fail_timeout_ms. 0 = off.
  uint32_t max_fails = defaults::kUpstreamMaxFails;
  uint32_t fail_timeout_ms = defaults::kUpstreamFailTimeoutMs;
  /// Servers tried for one client connection before it is given up (each connect that fails
  /// moves to another server); at most the number of servers.
  uint32_t connect_tries = defaults::kUpstreamConnectTries;
  HealthCheckOptions health;
  ProxyProtocolVersion proxy_protocol = ProxyProtocolVersion::kOff;
  /// How often host names are resolved again (0 = only at start).
  uint32_t resolve_interval_ms = defaults::kUpstreamResolveIntervalMs;
  /// Idle pooled connections per worker (HTTP mode; unused by the TCP relay).
  uint32_t keepalive = defaults::kUpstreamKeepalive;
  friend bool operator==(const UpstreamGroupOptions&, const UpstreamGroupOptions&) = default;
};

inline constexpr uint32_t kMaxWeight = 1000;

/// "HOST:PORT [weight=N], ..." (IPv6 hosts in brackets). At least one server.
Result<std::vector<ServerSpec>, Error> parse_servers(std::string_view text);
/// "round_robin" | "least_conn" | "hash".
Result<Balance, Error> parse_balance(std::string_view text);
/// "none" | "tcp" | "http:/PATH" (sets kind and path; the timing fields stay).
Result<void, Error> parse_health_check(std::string_view text, HealthCheckOptions& health);
/// "off" | "v1" | "v2".
Result<ProxyProtocolVersion, Error> parse_proxy_protocol(std::string_view text);

const char* to_string(Balance balance) noexcept;
const char* to_string(ProxyProtocolVersion version) noexcept;
/// "none", "tcp" or "http:/PATH".
std::string to_string(const HealthCheckOptions& health);

/// Whether a group can be served: a name, servers with ports and weights in range, a positive
/// health interval, rise and fall of at least 1... The message names the group and the field.
Result<void, Error> validate(const UpstreamGroupOptions& group);
/// Every group valid, and no name twice.
Result<void, Error> validate(const std::vector<UpstreamGroupOptions>& groups);

}  // namespace ucp::proxy
