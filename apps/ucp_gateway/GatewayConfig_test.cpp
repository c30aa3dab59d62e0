// bin/ucp_gateway's sections: the shipped example loads into the settings it says, every
// default is the library's, and what cannot be served is refused at load (so --check-config
// and SIGHUP refuse it too), one line naming the file, line and key.

#include "GatewayConfig.h"

#include <string>

#include <gtest/gtest.h>

#include "ucp/app/ServerSections.h"

namespace ucp::gateway {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

class GatewayConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    app::declare_server_sections(schema_);
    declare_gateway_sections(schema_);
  }
  Result<app::Config, app::ConfigError> parse(const std::string& text) {
    return app::Config::parse(schema_, text, "gw.conf", {}, app::MachineLimits{64 * kGiB, 2});
  }
  std::string error_of(const std::string& text) {
    auto parsed = parse(text);
    return parsed ? "" : parsed.error().message();
  }
  app::ConfigSchema schema_;
};

TEST_F(GatewayConfig, TheShippedExampleLoads) {
  auto loaded = app::Config::load(schema_, UCP_SOURCE_DIR "/config/gateway.conf", {},
                                  app::MachineLimits{64 * kGiB, 2});
  ASSERT_TRUE(loaded) << loaded.error().message();
  const GatewaySettings s = gateway_settings(*loaded);
  EXPECT_EQ(s.mode, Mode::kHttp);
  EXPECT_EQ(s.upstream, "app");
  EXPECT_EQ(s.admin_port, 9090);
  ASSERT_EQ(s.groups.size(), 1u);
  const proxy::UpstreamGroupOptions& app = s.groups[0];
  EXPECT_EQ(app.name, "app");
  ASSERT_EQ(app.servers.size(), 2u);
  EXPECT_EQ(app.servers[1].port, 9002);
  EXPECT_EQ(app.health.kind, proxy::HealthCheckKind::kHttp);
  EXPECT_EQ(app.health.path, "/healthz");
  ASSERT_EQ(s.routes.size(), 1u);
  EXPECT_EQ(s.routes[0].path_prefix, "/healthz");
}

TEST_F(GatewayConfig, DefaultsAreTheLibrarys) {
  auto parsed = parse("[upstream.a]\nservers = 10.0.0.7:80 weight=2, app.internal:8080\n");
  ASSERT_TRUE(parsed) << parsed.error().message();
  const GatewaySettings s = gateway_settings(*parsed);
  EXPECT_EQ(s.mode, Mode::kHttp);
  EXPECT_EQ(s.upstream, "");
  EXPECT_EQ(s.admin_port, 0);
  EXPECT_EQ(s.max_body_bytes, 0u);
  ASSERT_EQ(s.groups.size(), 1u);
  proxy::UpstreamGroupOptions expected;
  expected.name = "a";
  expected.servers = {{"10.0.0.7", 80, 2}, {"app.internal", 8080, 1}};
  EXPECT_TRUE(s.groups[0] == expected);  // every other field at the library's default
}

TEST_F(GatewayConfig, ParsesEveryKey) {
  auto parsed = parse(
      "[gateway]\nmode = tcp\nupstream = db\nadmin_port = 9191\naccept_proxy_protocol = true\n"
      "[upstream.db]\nservers = [::1]:5432\nbalance = hash\nconnect_timeout_ms = 1s\n"
      "idle_timeout_ms = 2m\nmax_fails = 0\nfail_timeout_ms = 5s\nhealth_check = tcp\n"
      "health_interval_ms = 500\nproxy_protocol = v2\nkeepalive = 0\nconnect_tries = 2\n"
      "total_timeout_ms = 1h\n");
  ASSERT_TRUE(parsed) << parsed.error().message();
  const GatewaySettings s = gateway_settings(*parsed);
  EXPECT_EQ(s.mode, Mode::kTcp);
  EXPECT_TRUE(s.accept_proxy_protocol);
  const proxy::UpstreamGroupOptions& g = s.groups.at(0);
  EXPECT_EQ(g.servers.at(0).host, "::1");
  EXPECT_EQ(g.balance, proxy::Balance::kHash);
  EXPECT_EQ(g.connect_timeout_ms, 1000u);
  EXPECT_EQ(g.idle_timeout_ms, 120000u);
  EXPECT_EQ(g.max_fails, 0u);
  EXPECT_EQ(g.fail_timeout_ms, 5000u);
  EXPECT_EQ(g.health.kind, proxy::HealthCheckKind::kTcp);
  EXPECT_EQ(g.health.interval_ms, 500u);
  EXPECT_EQ(g.proxy_protocol, proxy::ProxyProtocolVersion::kV2);
  EXPECT_EQ(g.keepalive, 0u);
  EXPECT_EQ(g.connect_tries, 2u);
  EXPECT_EQ(g.total_timeout_ms, 3600000u);
}

TEST_F(GatewayConfig, RefusesWhatCannotBeServed) {
  const std::string group = "[upstream.a]\nservers = 127.0.0.1:1\n";
  EXPECT_NE(error_of("[gateway]\nmode = tcp\n" + group).find("gateway.upstream"),
            std::string::npos);
  EXPECT_NE(error_of("[gateway]\nupstream = b\n" + group).find("gw.conf:2: gateway.upstream"),
            std::string::npos);
  EXPECT_NE(error_of(group + "[route.r]\nupstream = nope\n").find("route.r.upstream"),
            std::string::npos);
  EXPECT_NE(error_of(group + "[route.r]\nupstream = a\npath_prefix = api\n").find("path_prefix"),
            std::string::npos);
  EXPECT_NE(error_of("[upstream.a]\nservers = 127.0.0.1\n").find("upstream.a.servers"),
            std::string::npos);
  EXPECT_NE(error_of("[upstream.a]\nservers = 127.0.0.1:1 weight=0\n").find("weight"),
            std::string::npos);
  EXPECT_NE(error_of("[upstream.a]\n").find("upstream.a.servers"), std::string::npos);
  EXPECT_NE(error_of(group + "health_check = http:healthz\n").find("health_check"),
            std::string::npos);
  EXPECT_NE(error_of(group + "balance = random\n").find("balance"), std::string::npos);
  EXPECT_NE(error_of("[gateway]\nmode = udp\n").find("gateway.mode"), std::string::npos);
  EXPECT_NE(error_of("[route.r]\nupstream = a\n").find("route.r.upstream"), std::string::npos);
  EXPECT_NE(error_of(group + "[gateway]\nadmin_prot = 1\n").find("did you mean"),
            std::string::npos);
}

}  // namespace
}  // namespace ucp::gateway
