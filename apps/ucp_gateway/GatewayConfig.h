#pragma once
// bin/ucp_gateway's own config sections, beside the library's ([server], [event_loop], [log],
// [http]): [gateway], the upstream groups [upstream.NAME] and the HTTP routes [route.NAME]
// (docs/gateway.md has the reference, config/gateway.conf an example):
//
//   [gateway]        mode = http | tcp, upstream, admin_port, accept_proxy_protocol,
//                    max_body_bytes
//   [upstream.NAME]  servers, balance, connect_timeout_ms, idle_timeout_ms, max_fails,
//                    fail_timeout_ms, health_check, health_interval_ms, proxy_protocol,
//                    keepalive, connect_tries, total_timeout_ms
//   [route.NAME]     host, path_prefix, upstream
//
// Every key of the upstream and route sections, and gateway.upstream, is reloadable: SIGHUP
// replaces the groups and routes. The checks across keys (a route naming a group that is not
// there, a tcp gateway without an upstream) run at load, so --check-config and SIGHUP refuse
// such a file as they refuse a typo.

#include <cstdint>
#include <string>
#include <vector>

#include "ucp/app/Config.h"
#include "ucp/app/ConfigSchema.h"
#include "ucp/proxy/HttpRoutes.h"
#include "ucp/proxy/UpstreamConfig.h"

namespace ucp::gateway {

enum class Mode : uint8_t { kHttp, kTcp };

struct GatewaySettings {
  Mode mode = Mode::kHttp;
  std::string upstream;  // tcp: the group; http: what no route matches ("" = 404)
  uint16_t admin_port = 0;
  bool accept_proxy_protocol = false;  // tcp
  uint64_t max_body_bytes = 0;         // http; 0 = no bound
  std::vector<proxy::UpstreamGroupOptions> groups;
  std::vector<proxy::HttpRoute> routes;
};

void declare_gateway_sections(app::ConfigSchema& schema);

/// What a configuration loaded with those sections says.
GatewaySettings gateway_settings(const app::Config& config);

}  // namespace ucp::gateway
