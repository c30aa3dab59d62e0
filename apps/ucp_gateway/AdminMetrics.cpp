#include "AdminMetrics.h"

#include "ucp/metrics/Exposition.h"
#include "ucp/metrics/ProcessMetrics.h"

namespace ucp::gateway {
namespace {

using metrics::Exposition;
using metrics::Labels;
using metrics::MetricType;

Labels upstream_label(const std::string& upstream) { return {{"upstream", upstream}}; }

Labels server_labels(const std::string& upstream, const std::string& server) {
  return {{"upstream", upstream}, {"server", server}};
}

void gateway_families(const GatewaySnapshot& s, Exposition& out) {
  out.family("ucp_gateway_connections_open", MetricType::kGauge, "Client connections open now.");
  out.sample("ucp_gateway_connections_open", {}, s.connections_open);
  if (s.http) {
    const proxy::HttpProxyStats& h = *s.http;
    out.family("ucp_gateway_connections_total", MetricType::kCounter,
               "Client connections accepted.");
    out.sample("ucp_gateway_connections_total", {}, h.connections);
    out.family("ucp_gateway_requests_total", MetricType::kCounter, "Client requests read.");
    out.sample("ucp_gateway_requests_total", {}, h.requests);
    out.family("ucp_gateway_not_found_total", MetricType::kCounter,
               "Requests no route matched, without a default group (404).");
    out.sample("ucp_gateway_not_found_total", {}, h.not_found);
    out.family("ucp_gateway_refused_total", MetricType::kCounter,
               "Malformed, ambiguous or oversized requests refused (400, 408, 413, 414, 431...).");
    out.sample("ucp_gateway_refused_total", {}, h.refused);
    out.family("ucp_gateway_upgrades_total", MetricType::kCounter, "WebSocket upgrades relayed.");
    out.sample("ucp_gateway_upgrades_total", {}, h.upgrades);
  }
  if (s.tcp) {
    const proxy::TcpProxyStats& t = *s.tcp;
    out.family("ucp_gateway_connections_total", MetricType::kCounter,
               "Client connections accepted.");
    out.sample("ucp_gateway_connections_total", {}, t.connections);
    out.family("ucp_gateway_relayed_bytes_total", MetricType::kCounter, "Bytes relayed.");
    out.sample("ucp_gateway_relayed_bytes_total", {{"direction", "to_upstream"}},
               t.client_to_upstream_bytes);
    out.sample("ucp_gateway_relayed_bytes_total", {{"direction", "to_client"}},
               t.upstream_to_client_bytes);
    out.family("ucp_gateway_relay_endings_total", MetricType::kCounter,
               "Relays ended other than by both sides closing.");
    out.sample("ucp_gateway_relay_endings_total", {{"reason", "reset"}}, t.resets);
    out.sample("ucp_gateway_relay_endings_total", {{"reason", "timeout"}}, t.timeouts);
    out.sample("ucp_gateway_relay_endings_total", {{"reason", "error"}}, t.errors);
    out.sample("ucp_gateway_relay_endings_total", {{"reason", "proxy_header_refused"}},
               t.proxy_header_refused);
  }
}

void upstream_families(const GatewaySnapshot& s, Exposition& out) {
  out.family("ucp_upstream_requests_total", MetricType::kCounter,
             "Requests (tcp: connections) sent to a server of the group.");
  for (const auto& u : s.http_upstreams) {
    out.sample("ucp_upstream_requests_total", upstream_label(u.upstream), u.requests);
  }
  if (s.tcp)
    out.sample("ucp_upstream_requests_total", upstream_label(s.tcp_upstream), s.tcp->relayed);

  out.family("ucp_upstream_responses_total", MetricType::kCounter,
             "The servers' answers by status class (http).");
  constexpr const char* kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
  for (const auto& u : s.http_upstreams) {
    for (size_t c = 0; c < 5; ++c) {
      out.sample("ucp_upstream_responses_total", {{"upstream", u.upstream}, {"class", kClasses[c]}},
                 u.responses[c]);
    }
  }

  out.family("ucp_upstream_errors_total", MetricType::kCounter,
             "Requests the group could not serve, by kind: no_server (503: all ejected or "
             "down), bad_gateway (502), timeout (504); and connect: each failed connect.");
  for (const auto& u : s.http_upstreams) {
    const auto add = [&](const char* kind, uint64_t value) {
      out.sample("ucp_upstream_errors_total", {{"upstream", u.upstream}, {"kind", kind}}, value);
    };
    add("no_server", u.no_server);
    add("bad_gateway", u.bad_gateway);
    add("timeout", u.gateway_timeouts);
    add("connect", u.connect_errors);
  }
  if (s.tcp) {
    uint64_t failed = 0;
    for (const auto& g : s.groups) {
      if (g.name != s.tcp_upstream) continue;
      for (const auto& p : g.peers) failed += p.connect_failures;
    }
    out.sample("ucp_upstream_errors_total", {{"upstream", s.tcp_upstream}, {"kind", "no_server"}},
               s.tcp->no_server);
    out.sample("ucp_upstream_errors_total", {{"upstream", s.tcp_upstream}, {"kind", "connect"}},
               failed);
  }

  out.family("ucp_upstream_connections_total", MetricType::kCounter,
             "Requests by the connection they went on: a new one or a pooled one (http).");
  for (const auto& u : s.http_upstreams) {
    out.sample("ucp_upstream_connections_total", {{"upstream", u.upstream}, {"kind", "new"}},
               u.connections_made);
    out.sample("ucp_upstream_connections_total", {{"upstream", u.upstream}, {"kind", "reused"}},
               u.connections_reused);
  }

  out.family("ucp_upstream_pool_connections", MetricType::kGauge,
             "Connections to the group now: active (a request or relay on it) and idle "
             "(pooled keep-alive, http).");
  for (const auto& g : s.groups) {
    uint64_t active = 0;
    for (const auto& p : g.peers) active += p.active;
    uint64_t idle = 0;
    for (const auto& u : s.http_upstreams) {
      if (u.upstream == g.name) idle = u.pool_idle;
    }
    out.sample("ucp_upstream_pool_connections", {{"upstream", g.name}, {"state", "active"}},
               active);
    out.sample("ucp_upstream_pool_connections", {{"upstream", g.name}, {"state", "idle"}}, idle);
  }

  out.family("ucp_upstream_server_up", MetricType::kGauge,
             "1 while the server takes connections; 0 while it fails its health checks or is "
             "ejected after failed connects.");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      out.sample("ucp_upstream_server_up", server_labels(g.name, p.name),
                 uint64_t{!p.down && !p.ejected});
    }
  }
  out.family("ucp_upstream_server_health", MetricType::kGauge,
             "1 for the server's state: up, down (failing active health checks) or ejected "
             "(passive health).");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      const char* state = p.down ? "down" : p.ejected ? "ejected" : "up";
      for (const char* each : {"up", "down", "ejected"}) {
        out.sample("ucp_upstream_server_health",
                   {{"upstream", g.name}, {"server", p.name}, {"state", each}},
                   uint64_t{std::string_view(each) == state});
      }
    }
  }
  out.family("ucp_upstream_server_active", MetricType::kGauge,
             "Requests or relays on the server now.");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      out.sample("ucp_upstream_server_active", server_labels(g.name, p.name), p.active);
    }
  }
  out.family("ucp_upstream_server_connects_total", MetricType::kCounter,
             "Connections made to the server.");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      out.sample("ucp_upstream_server_connects_total", server_labels(g.name, p.name), p.connects);
    }
  }
  out.family("ucp_upstream_server_connect_failures_total", MetricType::kCounter,
             "Connects to the server that failed (refused, unreachable, timed out).");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      out.sample("ucp_upstream_server_connect_failures_total", server_labels(g.name, p.name),
                 p.connect_failures);
    }
  }
  out.family("ucp_upstream_server_connect_seconds_total", MetricType::kCounter,
             "Time the connects to the server took, summed (divide by "
             "ucp_upstream_server_connects_total for the mean).");
  for (const auto& g : s.groups) {
    for (const auto& p : g.peers) {
      out.sample("ucp_upstream_server_connect_seconds_total", server_labels(g.name, p.name),
                 static_cast<double>(p.connect_time_us) / 1e6);
    }
  }
}

}  // namespace

void render_metrics(const GatewaySnapshot& snapshot, std::string& out) {
  Exposition exposition(out);
  gateway_families(snapshot, exposition);
  upstream_families(snapshot, exposition);
  metrics::write_process_metrics(exposition);
  metrics::write_build_info(exposition);
}

}  // namespace ucp::gateway
