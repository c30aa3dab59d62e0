// UpstreamConfig: the text forms of the [upstream.NAME] keys, and what validate() refuses.

#include "ucp/proxy/UpstreamConfig.h"

#include <gtest/gtest.h>

namespace ucp::proxy {
namespace {

TEST(UpstreamConfig, ParsesServersWithWeightsAndBracketedIpv6) {
  auto servers = parse_servers("10.0.0.7:8080 weight=3, app.internal:80,[::1]:9000  weight=2");
  ASSERT_TRUE(servers) << servers.error().message;
  ASSERT_EQ(servers->size(), 3u);
  EXPECT_EQ((*servers)[0], (ServerSpec{"10.0.0.7", 8080, 3}));
  EXPECT_EQ((*servers)[1], (ServerSpec{"app.internal", 80, 1}));
  EXPECT_EQ((*servers)[2], (ServerSpec{"::1", 9000, 2}));
}

TEST(UpstreamConfig, RefusesMalformedServerLists) {
  for (const char* bad : {"", " ", "a:1,", ",a:1", "a", "a:", "a:0", "a:65536", "a:1x", "::1:80",
                          "[::1]80", "[]:80", "[1.2.3.4]:80", "a:1 weight=0", "a:1 weight=1001",
                          "a:1 weight=", "a:1 backup", "a b:1", "a/b:1"}) {
    auto servers = parse_servers(bad);
    EXPECT_FALSE(servers) << "'" << bad << "' was accepted";
    if (!servers) {
      EXPECT_FALSE(servers.error().message.empty());
    }
  }
}

TEST(UpstreamConfig, ParsesBalanceHealthCheckAndProxyProtocol) {
  EXPECT_EQ(*parse_balance("round_robin"), Balance::kRoundRobin);
  EXPECT_EQ(*parse_balance("least_conn"), Balance::kLeastConn);
  EXPECT_EQ(*parse_balance("hash"), Balance::kHash);
  EXPECT_FALSE(parse_balance("random"));

  HealthCheckOptions health;
  ASSERT_TRUE(parse_health_check("http:/healthz", health));
  EXPECT_EQ(health.kind, HealthCheckKind::kHttp);
  EXPECT_EQ(health.path, "/healthz");
  EXPECT_EQ(to_string(health), "http:/healthz");
  ASSERT_TRUE(parse_health_check("tcp", health));
  EXPECT_EQ(health.kind, HealthCheckKind::kTcp);
  ASSERT_TRUE(parse_health_check("none", health));
  EXPECT_EQ(health.kind, HealthCheckKind::kNone);
  for (const char* bad : {"http:", "http:healthz", "http:/a b", "https:/x", "TCP"}) {
    EXPECT_FALSE(parse_health_check(bad, health)) << bad;
  }

  EXPECT_EQ(*parse_proxy_protocol("off"), ProxyProtocolVersion::kOff);
  EXPECT_EQ(*parse_proxy_protocol("v1"), ProxyProtocolVersion::kV1);
  EXPECT_EQ(*parse_proxy_protocol("v2"), ProxyProtocolVersion::kV2);
  EXPECT_FALSE(parse_proxy_protocol("v3"));
}

TEST(UpstreamConfig, ValidateNamesTheGroupAndTheField) {
  UpstreamGroupOptions group;
  group.name = "app";
  EXPECT_NE(validate(group).error().message.find("upstream 'app': no servers"), std::string::npos);
  group.servers = {{"10.0.0.1", 80, 1}};
  EXPECT_TRUE(validate(group));
  group.health.kind = HealthCheckKind::kTcp;
  group.health.rise = 0;
  EXPECT_FALSE(validate(group));
  group.health.rise = 2;
  group.connect_tries = 0;
  EXPECT_FALSE(validate(group));
  group.connect_tries = 3;
  EXPECT_TRUE(validate(group));
  auto twice = validate(std::vector<UpstreamGroupOptions>{group, group});
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("defined twice"), std::string::npos);
}

}  // namespace
}  // namespace ucp::proxy
