#pragma once
// The Prometheus text exposition of the gateway for GET /metrics on the admin listener: the
// gateway's own counts and, per upstream group and server, requests, answers by class, errors
// by kind, connects and their time, connections in flight and pooled, and health state
// (docs/gateway.md lists every family).

#include <string>
#include <vector>

#include "ucp/proxy/HttpProxy.h"
#include "ucp/proxy/TcpProxy.h"
#include "ucp/proxy/Upstreams.h"

namespace ucp::gateway {

struct GatewaySnapshot {
  uint64_t connections_open = 0;
  std::vector<proxy::GroupStats> groups;  // health and per-server counts (both modes)
  // http mode
  std::optional<proxy::HttpProxyStats> http;
  std::vector<proxy::HttpUpstreamStats> http_upstreams;
  // tcp mode
  std::optional<proxy::TcpProxyStats> tcp;
  std::string tcp_upstream;
};

/// Appends the exposition of `snapshot` (then process_* and ucp_build_info) to `out`.
void render_metrics(const GatewaySnapshot& snapshot, std::string& out);

}  // namespace ucp::gateway
