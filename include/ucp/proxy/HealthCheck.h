#pragma once
// check_server(): one active health check of one server address, as a group's options say.
//
//   auto result = co_await check_server(loop, address, "app.internal:8080", group.health,
//                                       1000, group.proxy_protocol);
//   if (!result.passed) LOG_WARN("... {}", result.detail);   // "connection refused", "status 503"
//
// - tcp: the connect succeeds within the timeout.
// - http: the connect succeeds, a GET of the path (HTTP/1.1, Host, Connection: close; written
//   here by hand, so that the proxy needs no HTTP layer) is answered within the timeout with a
//   status line "HTTP/1.x 2xx". Only the status line is read (at most 1 KiB).
// A group that sends the PROXY protocol to its servers sends it on checks too (servers that
// expect it refuse a connection without it): v2 as a LOCAL header, v1 as a line with the
// check connection's own endpoints, as the specification recommends for checks.
//
// Thread contract: the loop's thread (the control thread of Upstreams).

#include <cstdint>
#include <string>

#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/proxy/UpstreamConfig.h"

namespace ucp::proxy {

struct HealthCheckResult {
  bool passed = false;
  std::string detail;  // why it failed ("timed out", "status 503", ...); empty when it passed
};

/// Checks `address` (kind and path from `health`), all within `timeout_ms`. `host` is the
/// Host header of an HTTP check.
Task<HealthCheckResult> check_server(EventLoop& loop, InetAddress address, std::string host,
                                     HealthCheckOptions health, uint32_t timeout_ms,
                                     ProxyProtocolVersion proxy_protocol);

}  // namespace ucp::proxy
