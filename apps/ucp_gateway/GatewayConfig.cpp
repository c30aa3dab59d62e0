#include "GatewayConfig.h"

#include <chrono>
#include <string_view>

namespace ucp::gateway {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kOneHour{3600000};
constexpr milliseconds kOneDay{86400000};

std::string check_server(std::string_view item) {
  auto parsed = proxy::parse_servers(item);
  return parsed ? std::string() : parsed.error().message;
}

std::string check_health(std::string_view text) {
  proxy::HealthCheckOptions health;
  auto parsed = proxy::parse_health_check(text, health);
  return parsed ? std::string() : parsed.error().message;
}

std::string check_prefix(std::string_view text) {
  return !text.empty() && text.front() == '/' ? std::string() : "must start with '/'";
}

bool names_group(const app::Config& config, const std::string& name) {
  for (const std::string& group : config.instances("upstream")) {
    if (group == name) return true;
  }
  return false;
}

}  // namespace

void declare_gateway_sections(app::ConfigSchema& schema) {
  auto& g = schema.section("gateway", "bin/ucp_gateway: what it does with what it accepts");
  g.choice("mode", "http", {"http", "tcp"},
           "http: route requests to upstream groups | tcp: relay bytes to one group")
      .noun("a mode");
  g.text("upstream", "",
         "tcp: the group connections are relayed to; http: the group for requests no route "
         "matches (empty: 404)")
      .reloadable();
  g.integer("admin_port", 0, 0, 65535,
            "0 = off; else GET /metrics and /healthz on server.ip:admin_port");
  g.flag("accept_proxy_protocol", false,
         "tcp: expect a PROXY protocol header (v1 or v2) first on every client connection")
      .reloadable();
  g.size("max_body_bytes", 0, 0, uint64_t{1} << 40,
         "http: largest request body passed on (streamed, never held); 0 = no bound")
      .reloadable();

  auto& u = schema.family("upstream", "a group of servers: [upstream.NAME]");
  u.list("servers", {}, "HOST:PORT [weight=N], ...; host names resolved off the loops")
      .required()
      .non_empty()
      .check(check_server)
      .reloadable();
  u.choice("balance", "round_robin", {"round_robin", "least_conn", "hash"},
           "round_robin (weighted) | least_conn | hash (consistent, of the client address)")
      .noun("a balance")
      .reloadable();
  u.duration("connect_timeout_ms", milliseconds(defaults::kUpstreamConnectTimeoutMs),
             milliseconds(1), kOneHour, "one connect attempt")
      .reloadable();
  u.duration("idle_timeout_ms", milliseconds(defaults::kUpstreamIdleTimeoutMs), {}, kOneDay,
             "tcp: a relay idle this long is closed; http: the wait for an answer (504) and for "
             "each piece of it, and how long a pooled connection is kept unused; 0 = none")
      .reloadable();
  u.integer("max_fails", defaults::kUpstreamMaxFails, 0, 1000,
            "passive health: that many failed connects in a row eject a server; 0 = off")
      .reloadable();
  u.duration("fail_timeout_ms", milliseconds(defaults::kUpstreamFailTimeoutMs), milliseconds(1),
             kOneDay, "how long an ejected server is left out")
      .reloadable();
  u.text("health_check", "none", "none | tcp | http:/PATH (expects 2xx)")
      .check(check_health)
      .reloadable();
  u.duration("health_interval_ms", milliseconds(defaults::kHealthIntervalMs), milliseconds(10),
             kOneHour, "how often each server is checked")
      .reloadable();
  u.choice("proxy_protocol", "off", {"off", "v1", "v2"},
           "the PROXY protocol header sent to the servers")
      .noun("a PROXY protocol version")
      .reloadable();
  u.integer("keepalive", defaults::kUpstreamKeepalive, 0, 100000,
            "http: idle pooled connections to the group, per worker")
      .reloadable();
  u.integer("connect_tries", defaults::kUpstreamConnectTries, 1, 8,
            "servers tried for one client before it gets no server (502, or a close in tcp)")
      .reloadable();
  u.duration("total_timeout_ms", milliseconds(defaults::kUpstreamTotalTimeoutMs), {}, kOneDay,
             "a relayed connection (tcp, or a WebSocket) is closed this long after it began; "
             "0 = never")
      .reloadable();

  auto& r = schema.family("route", "http: where requests go: [route.NAME]");
  r.text("host", "*", "exact host (the Host header, any case, port ignored) or *")
      .non_empty()
      .reloadable();
  r.text("path_prefix", "/", "the longest prefix of the (normalized) path wins")
      .check(check_prefix)
      .reloadable();
  r.text("upstream", "", "the group the route's requests go to")
      .required()
      .non_empty()
      .reloadable();

  schema.check([](const app::Config& c, app::ConfigProblems& problems) {
    const std::string upstream = c.get<std::string>("gateway.upstream");
    if (c.get<std::string>("gateway.mode") == "tcp" && upstream.empty()) {
      problems.fail({"gateway.mode", "gateway.upstream"},
                    "a tcp gateway needs gateway.upstream (the group to relay to)");
    }
    if (!upstream.empty() && !names_group(c, upstream)) {
      problems.fail({"gateway.upstream"}, "no [upstream." + upstream + "] section");
    }
    for (const std::string& route : c.instances("route")) {
      const std::string key = "route." + route + ".upstream";
      const std::string group = c.get<std::string>(key);
      if (!names_group(c, group)) {
        problems.fail(std::vector<std::string>{key}, "no [upstream." + group + "] section");
      }
    }
  });
}

GatewaySettings gateway_settings(const app::Config& c) {
  GatewaySettings s;
  s.mode = c.get<std::string>("gateway.mode") == "tcp" ? Mode::kTcp : Mode::kHttp;
  s.upstream = c.get<std::string>("gateway.upstream");
  s.admin_port = c.get<uint16_t>("gateway.admin_port");
  s.accept_proxy_protocol = c.get<bool>("gateway.accept_proxy_protocol");
  s.max_body_bytes = c.get<uint64_t>("gateway.max_body_bytes");
  for (const std::string& name : c.instances("upstream")) {
    const std::string p = "upstream." + name + ".";
    proxy::UpstreamGroupOptions g;
    g.name = name;
    for (const std::string& item : c.get<std::vector<std::string>>(p + "servers")) {
      auto servers = proxy::parse_servers(item);  // checked at load
      if (servers) g.servers.insert(g.servers.end(), servers->begin(), servers->end());
    }
    g.balance = proxy::parse_balance(c.get<std::string>(p + "balance"))
                    .value_or(proxy::Balance::kRoundRobin);
    g.connect_timeout_ms = c.get<uint32_t>(p + "connect_timeout_ms");
    g.idle_timeout_ms = c.get<uint32_t>(p + "idle_timeout_ms");
    g.max_fails = c.get<uint32_t>(p + "max_fails");
    g.fail_timeout_ms = c.get<uint32_t>(p + "fail_timeout_ms");
    (void)proxy::parse_health_check(c.get<std::string>(p + "health_check"), g.health);
    g.health.interval_ms = c.get<uint32_t>(p + "health_interval_ms");
    g.proxy_protocol = proxy::parse_proxy_protocol(c.get<std::string>(p + "proxy_protocol"))
                           .value_or(proxy::ProxyProtocolVersion::kOff);
    g.keepalive = c.get<uint32_t>(p + "keepalive");
    g.connect_tries = c.get<uint32_t>(p + "connect_tries");
    g.total_timeout_ms = c.get<uint32_t>(p + "total_timeout_ms");
    s.groups.push_back(std::move(g));
  }
  for (const std::string& name : c.instances("route")) {
    const std::string p = "route." + name + ".";
    s.routes.push_back({name, c.get<std::string>(p + "host"), c.get<std::string>(p + "path_prefix"),
                        c.get<std::string>(p + "upstream")});
  }
  return s;
}

}  // namespace ucp::gateway
