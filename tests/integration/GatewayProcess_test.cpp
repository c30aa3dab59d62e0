// bin/ucp_gateway (HTTP mode) as a process in front of bin/http_server processes, with curl,
// wrk and Node's ws as clients: pooled connections counted at the upstreams, each balance's
// spread, an upstream killed in the middle of a response, a refusing upstream retried within
// the bound, health checks taking a server out and back, SIGHUP under load without a failed
// request, the graceful drain on SIGTERM, /metrics read by promtool, WebSocket through it, and
// fd exhaustion.

#include "GatewayProcess.h"

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "Command.h"
#include "ExternalProcess.h"
#include "LoopbackClient.h"
#include "NodeWs.h"
#include "ScriptedServer.h"

namespace ucp::test {
namespace {

using namespace std::chrono_literals;

#define SKIP_WITHOUT_GATEWAY()                       \
  if (::access(kGatewayBinary.c_str(), X_OK) != 0) { \
    GTEST_SKIP() << kGatewayBinary << " not built";  \
  }                                                  \
  do {                                               \
  } while (0)

#define START_OR_FAIL(upstream) ASSERT_TRUE((upstream).started()) << (upstream).error()

std::string group(const std::string& name, const std::vector<const HttpUpstream*>& servers,
                  const std::string& more = "") {
  std::string text = "[upstream." + name + "]\nservers = ";
  for (size_t i = 0; i < servers.size(); ++i) text += (i ? ", " : "") + servers[i]->address();
  return text + "\n" + more;
}

/// GET `path` `n` times on one keep-alive connection; the bodies in order.
std::vector<std::string> get_many(uint16_t port, const std::string& path, int n,
                                  const std::string& source_ip = "") {
  std::vector<std::string> bodies;
  Result<UniqueFd> fd = Unexpected{std::make_error_code(std::errc::not_connected)};
  if (source_ip.empty()) {
    fd = connect_loopback(port);
  } else {
    fd = connect_from(source_ip, port);
  }
  if (!fd) return bodies;
  std::string pending;
  for (int i = 0; i < n; ++i) {
    if (!send_text(fd->get(), "GET " + path + " HTTP/1.1\r\nHost: g\r\n\r\n")) break;
    auto reply = read_response(fd->get(), pending, 10000);
    if (!reply) break;
    bodies.push_back(reply->status == 200 ? reply->body
                                          : "status " + std::to_string(reply->status));
  }
  return bodies;
}

int count(const std::vector<std::string>& all, const std::string& one) {
  return static_cast<int>(std::count(all.begin(), all.end(), one));
}

/// The integer after `prefix` in wrk's output ("N requests in"), or -1.
long long wrk_figure(const std::string& output, const std::string& before) {
  const size_t at = output.find(before);
  if (at == std::string::npos) return -1;
  size_t start = output.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return std::stoll(output.substr(start, at - start));
}

TEST(GatewayProcess, CurlAndWrkGoThroughAndPooledConnectionsAreReused) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a"), b("b");
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  ScratchDir dir;
  const uint16_t admin = free_loopback_port();
  auto gateway =
      start_gateway(dir, "[gateway]\nupstream = app\nadmin_port = " + std::to_string(admin) + "\n" +
                             group("app", {&a, &b}));
  ASSERT_TRUE(gateway->alive());
  const std::string url = "http://127.0.0.1:" + std::to_string(gateway->port());
  // curl: one keep-alive connection for the four URLs, round robin between the two servers.
  auto curl =
      run_command({"curl", "-s", url + "/who", url + "/who", url + "/who", url + "/who"}, 20000);
  ASSERT_EQ(curl.exit_code, 0) << curl.output;
  EXPECT_EQ(curl.output, "abab");
  // wrk: every request answered 200, over a handful of pooled upstream connections.
  if (!have_program("wrk")) GTEST_SKIP() << "wrk is not installed (scripts/install-deps.sh)";
  auto wrk = run_command({"wrk", "-t1", "-c8", "-d1s", url + "/who"}, 30000);
  ASSERT_EQ(wrk.exit_code, 0) << wrk.output;
  const long long requests = wrk_figure(wrk.output, " requests in ");
  EXPECT_GT(requests, 100) << wrk.output;
  EXPECT_EQ(wrk.output.find("Non-2xx"), std::string::npos) << wrk.output;
  EXPECT_EQ(wrk.output.find("Socket errors"), std::string::npos) << wrk.output;
  const double accepted = metric(scrape(a.port()), "ucp_connections_accepted_total{worker=\"0\"}") +
                          metric(scrape(b.port()), "ucp_connections_accepted_total{worker=\"0\"}");
  std::printf("%lld requests through the gateway, %.0f connections accepted by the upstreams\n",
              requests, accepted);
  EXPECT_LT(accepted, 40);  // 8 clients, 2 servers; each request does not make its own
  const std::string exposition = scrape(admin);
  EXPECT_GT(metric(exposition, "ucp_upstream_connections_total{upstream=\"app\",kind=\"reused\"}"),
            static_cast<double>(requests) / 2);
  if (auto promtool = find_program({"/usr/bin/promtool", "/usr/local/bin/promtool"})) {
    const std::string file = dir.write("metrics.txt", exposition);
    auto checked = run_command({"sh", "-c", *promtool + " check metrics < " + file}, 20000);
    EXPECT_EQ(checked.exit_code, 0) << checked.output;
  }
  EXPECT_EQ(gateway->stop(SIGTERM).describe(), "exit 0") << gateway->output_tail();
}

TEST(GatewayProcess, EachBalanceSpreadsRequestsItsWay) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a"), b("b");
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  ScratchDir dir;
  auto gateway = start_gateway(
      dir, "[gateway]\nupstream = rr\n[upstream.rr]\nservers = " + a.address() + " weight=3, " +
               b.address() + "\n" + group("lc", {&a, &b}, "balance = least_conn\n") +
               group("h", {&a, &b}, "balance = hash\n") +
               "[route.lc]\npath_prefix = /lc/\nupstream = lc\n"
               "[route.h]\npath_prefix = /h/\nupstream = h\n");
  ASSERT_TRUE(gateway->alive());
  // Weighted round robin: exactly 3 to 1 over any 40 requests.
  const auto rr = get_many(gateway->port(), "/who", 40);
  EXPECT_EQ(count(rr, "a"), 30);
  EXPECT_EQ(count(rr, "b"), 10);
  // Least connections with one request at a time: always a tie, broken in turn.
  a.root().write("lc/who", "a");
  b.root().write("lc/who", "b");
  const auto lc = get_many(gateway->port(), "/lc/who", 20);
  EXPECT_EQ(count(lc, "a"), 10);
  EXPECT_EQ(count(lc, "b"), 10);
  // Hash of the client address: each source address sticks to one server; many spread.
  a.root().write("h/who", "a");
  b.root().write("h/who", "b");
  int on_a = 0;
  for (int host = 2; host < 34; ++host) {
    const std::string source = "127.0.0." + std::to_string(host);
    const auto answers = get_many(gateway->port(), "/h/who", 4, source);
    ASSERT_EQ(answers.size(), 4u) << source;
    EXPECT_EQ(count(answers, answers[0]), 4) << source << " moved between servers";
    on_a += answers[0] == "a" ? 1 : 0;
  }
  EXPECT_GT(on_a, 4);  // 32 addresses on two servers: both get some
  EXPECT_LT(on_a, 28);
}

TEST(GatewayProcess, AnUpstreamKilledMidResponseCutsOnlyItsOwnClients) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a"), b("b");
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  const std::string big(64 << 20, 'x');
  a.root().write("a/big", big);
  b.root().write("b/big", big);
  ScratchDir dir;
  auto gateway = start_gateway(dir, group("ga", {&a}) + group("gb", {&b}) +
                                        "[route.a]\npath_prefix = /a/\nupstream = ga\n"
                                        "[route.b]\npath_prefix = /b/\nupstream = gb\n");
  ASSERT_TRUE(gateway->alive());
  // A client of a that reads its answer slowly, so that it is still in flight.
  auto slow = connect_loopback(gateway->port());
  ASSERT_TRUE(slow);
  set_receive_buffer(slow->get(), 64 * 1024);
  ASSERT_TRUE(send_text(slow->get(), "GET /a/big HTTP/1.1\r\nHost: g\r\n\r\n"));
  char buffer[65536];
  ASSERT_TRUE(recv_some(slow->get(), buffer, 5000));
  a.process().stop(SIGKILL);
  // Its client sees the answer end early (a reset, or the end of the stream) without a hang.
  size_t got = 0;
  for (;;) {
    auto n = recv_some(slow->get(), buffer, 10000);
    ASSERT_TRUE(n || n.error() == std::errc::connection_reset) << n.error().message();
    if (!n || *n == 0) break;
    got += *n;
  }
  EXPECT_LT(got, big.size());
  // b's clients are unaffected, during and after.
  EXPECT_EQ(http_get(gateway->port(), "/b/big").size(), big.size());
  EXPECT_EQ(http_get(gateway->port(), "/a/who"), "status 502");  // nothing answers for a now
  EXPECT_TRUE(gateway->alive());
}

TEST(GatewayProcess, ARefusingServerIsRetriedOnTheNextWithinTheBound) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a");
  START_OR_FAIL(a);
  std::vector<uint16_t> refusing;
  for (int i = 0; i < 3; ++i) refusing.push_back(free_loopback_port());
  ScratchDir dir;
  const uint16_t admin = free_loopback_port();
  auto gateway = start_gateway(
      dir, "[gateway]\nupstream = mixed\nadmin_port = " + std::to_string(admin) +
               "\n[upstream.mixed]\nservers = 127.0.0.1:" + std::to_string(refusing[0]) + ", " +
               a.address() + "\nmax_fails = 0\n[upstream.dead]\nservers = 127.0.0.1:" +
               std::to_string(refusing[1]) + ", 127.0.0.1:" + std::to_string(refusing[2]) +
               "\nmax_fails = 0\nconnect_tries = 2\n[route.dead]\npath_prefix = /dead/\n"
               "upstream = dead\n");
  ASSERT_TRUE(gateway->alive());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(http_get(gateway->port(), "/who"), "a") << i;
  EXPECT_EQ(http_get(gateway->port(), "/dead/who"), "status 502");
  const std::string exposition = scrape(admin);
  // Every other request met the refusing server first (round robin, no ejection).
  EXPECT_EQ(metric(exposition, "ucp_upstream_errors_total{upstream=\"mixed\",kind=\"connect\"}"),
            5);
  // Two tries for the request with no live server, no more.
  EXPECT_EQ(metric(exposition, "ucp_upstream_errors_total{upstream=\"dead\",kind=\"connect\"}"), 2);
  EXPECT_EQ(metric(exposition, "ucp_upstream_errors_total{upstream=\"dead\",kind=\"bad_gateway\"}"),
            1);
}

TEST(GatewayProcess, HealthChecksTakeAServerOutAndBringItBack) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a"), b("b");
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  ScratchDir dir;
  const uint16_t admin = free_loopback_port();
  auto gateway =
      start_gateway(dir, "[gateway]\nupstream = app\nadmin_port = " + std::to_string(admin) + "\n" +
                             group("app", {&a, &b},
                                   "health_check = http:/healthz\n"
                                   "health_interval_ms = 100\n"));
  ASSERT_TRUE(gateway->alive());
  const std::string b_up =
      "ucp_upstream_server_up{upstream=\"app\",server=\"" + b.address() + "\"}";
  auto wait_for = [&](double value) {
    for (int i = 0; i < 200; ++i) {
      if (metric(scrape(admin), b_up) == value) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  };
  ASSERT_TRUE(wait_for(1));
  b.process().send_signal(SIGSTOP);  // accepts (the kernel does), answers nothing
  ASSERT_TRUE(wait_for(0)) << gateway->output_tail();
  EXPECT_EQ(count(get_many(gateway->port(), "/who", 10), "a"), 10);  // b is left out
  b.process().send_signal(SIGCONT);
  ASSERT_TRUE(wait_for(1)) << gateway->output_tail();
  EXPECT_EQ(count(get_many(gateway->port(), "/who", 10), "b"), 5);  // and back in turn
  EXPECT_EQ(gateway->count_output_lines("is down"), 1u);
  EXPECT_EQ(gateway->count_output_lines("is up (2 health checks passed)"), 1u);
}

TEST(GatewayProcess, SighupUnderLoadFailsNoRequestAndABadFileChangesNothing) {
  SKIP_WITHOUT_GATEWAY();
  if (!have_program("wrk")) GTEST_SKIP() << "wrk is not installed (scripts/install-deps.sh)";
  HttpUpstream a("a"), b("b");
  START_OR_FAIL(a);
  START_OR_FAIL(b);
  ScratchDir dir;
  auto gateway = start_gateway(dir, "[gateway]\nupstream = app\n" + group("app", {&a}));
  ASSERT_TRUE(gateway->alive());
  const std::string url = "http://127.0.0.1:" + std::to_string(gateway->port()) + "/who";
  ExternalProcess wrk({"/usr/bin/wrk", "-t1", "-c8", "-d3s", url}, dir.path() + "/wrk.out");
  ASSERT_TRUE(wrk.start());
  std::this_thread::sleep_for(700ms);
  // b joins, and the balance changes.
  const std::string base =
      "[server]\nip = 127.0.0.1\nport = 0\nthread_num = 1\n"
      "shutdown_timeout_ms = 5000\n[log]\nconsole = true\nlevel = INFO\n"
      "file =\nflush_interval_ms = 20\n[gateway]\nupstream = app\n";
  dir.write("gateway.conf", base + group("app", {&a, &b}, "balance = least_conn\n"));
  gateway->send_signal(SIGHUP);
  std::this_thread::sleep_for(700ms);
  // A file that does not load: one ERROR line, the running set kept.
  dir.write("gateway.conf", base + group("app", {&a, &b}) + "[route.r]\nupstream = nowhere\n");
  gateway->send_signal(SIGHUP);
  ASSERT_EQ(wrk.wait(30s), 0);
  const std::string out = wrk.output();
  EXPECT_GT(wrk_figure(out, " requests in "), 100) << out;
  EXPECT_EQ(out.find("Non-2xx"), std::string::npos) << out;
  EXPECT_EQ(out.find("Socket errors"), std::string::npos) << out;
  EXPECT_GT(metric(scrape(b.port()), "ucp_http_requests_total{worker=\"0\",class=\"2xx\"}"), 0);
  EXPECT_EQ(gateway->count_output_lines("reloaded: 1 upstream group(s)"), 1u)
      << gateway->output_tail();
  EXPECT_EQ(gateway->count_output_lines("ERROR"), 1u) << gateway->output_tail();
  // Still serving both, with the running configuration.
  const auto after = get_many(gateway->port(), "/who", 4);
  EXPECT_EQ(count(after, "a") + count(after, "b"), 4);
}

TEST(GatewayProcess, SigtermLetsTheRequestInFlightFinishThenExits) {
  SKIP_WITHOUT_GATEWAY();
  // An upstream that takes its time to answer.
  ScriptedServer slow([](int fd) {
    if (read_head(fd).empty()) return;
    std::this_thread::sleep_for(600ms);
    (void)send_text(fd, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate");
  });
  ScratchDir dir;
  const uint16_t admin = free_loopback_port();
  auto gateway = start_gateway(
      dir, "[gateway]\nupstream = app\nadmin_port = " + std::to_string(admin) +
               "\n[upstream.app]\nservers = 127.0.0.1:" + std::to_string(slow.port()) + "\n");
  ASSERT_TRUE(gateway->alive());
  auto idle = connect_loopback(gateway->port());  // a keep-alive connection with no request
  ASSERT_TRUE(idle);
  auto busy = connect_loopback(gateway->port());
  ASSERT_TRUE(busy);
  ASSERT_TRUE(send_text(busy->get(), "GET / HTTP/1.1\r\nHost: g\r\n\r\n"));
  std::this_thread::sleep_for(100ms);
  gateway->send_signal(SIGTERM);
  std::string pending;
  auto reply = read_response(busy->get(), pending, 5000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body, "late");
  EXPECT_EQ(reply->header("connection"), "close");
  EXPECT_TRUE(drain_until_closed(idle->get(), 5000));  // closed at once, not after its timeout
  EXPECT_EQ(gateway->stop(SIGTERM, 10000).describe(), "exit 0") << gateway->output_tail();
  EXPECT_EQ(gateway->count_output_lines("stopped cleanly"), 1u);
}

TEST(GatewayProcess, NodeWsTalksToAnUpstreamThroughTheGateway) {
  SKIP_WITHOUT_GATEWAY();
  const std::string missing = node_ws_unavailable();
  if (!missing.empty()) GTEST_SKIP() << "Node ws client unavailable: " << missing;
  HttpUpstream a("a");
  START_OR_FAIL(a);
  ScratchDir dir;
  auto gateway = start_gateway(dir, "[gateway]\nupstream = app\n" + group("app", {&a}));
  ASSERT_TRUE(gateway->alive());
  const std::string url = "ws://127.0.0.1:" + std::to_string(gateway->port()) + "/ws/echo";
  for (const char* mode : {"plain", "deflate"}) {
    auto result =
        run_command({"node", UCP_SOURCE_DIR "/tests/interop/node_ws_client.js", url, mode}, 60000);
    EXPECT_EQ(result.exit_code, 0) << mode << ":\n" << result.output;
    EXPECT_NE(result.output.find("PASS"), std::string::npos) << result.output;
  }
}

TEST(GatewayProcess, FdExhaustionNeitherCrashesNorStopsTheGateway) {
  SKIP_WITHOUT_GATEWAY();
  HttpUpstream a("a");
  START_OR_FAIL(a);
  ScratchDir dir;
  auto gateway =
      start_gateway(dir, "[gateway]\nupstream = app\n" + group("app", {&a}), {}, /*nofile=*/64);
  ASSERT_TRUE(gateway->alive());
  // 100 clients at once, each holding its connection: the gateway runs out of fds. Each one
  // is then answered (200, or 502 when no fd was left for the upstream connection), closed,
  // or left waiting in the kernel's accept queue; none crashes the gateway.
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 100; ++i) {
    auto fd = connect_loopback(gateway->port());
    if (fd && send_text(fd->get(), "GET /who HTTP/1.1\r\nHost: g\r\n\r\n")) {
      clients.push_back(std::move(*fd));
    }
  }
  std::vector<std::string> pending(clients.size());
  std::vector<int> outcome(clients.size(), 0);  // 0 waiting, else a status, or -1 closed
  const auto deadline = std::chrono::steady_clock::now() + 4s;
  while (std::chrono::steady_clock::now() < deadline) {
    bool waiting = false;
    for (size_t i = 0; i < clients.size(); ++i) {
      if (outcome[i] != 0) continue;
      auto reply = read_response(clients[i].get(), pending[i], 10);
      if (reply) {
        outcome[i] = reply->status;
      } else if (reply.error() != std::errc::timed_out) {
        outcome[i] = -1;
      } else {
        waiting = true;
      }
    }
    if (!waiting) break;
  }
  const int ok = static_cast<int>(std::count(outcome.begin(), outcome.end(), 200));
  const int bad_gateway = static_cast<int>(std::count(outcome.begin(), outcome.end(), 502));
  const int closed = static_cast<int>(std::count(outcome.begin(), outcome.end(), -1));
  const int waiting = static_cast<int>(std::count(outcome.begin(), outcome.end(), 0));
  std::printf(
      "with 64 fds, 100 clients at once: %d answered 200, %d 502 (no fd for the "
      "upstream), %d closed, %d waiting to be accepted\n",
      ok, bad_gateway, closed, waiting);
  EXPECT_GT(ok + bad_gateway, 0);
  EXPECT_EQ(ok + bad_gateway + closed + waiting, static_cast<int>(clients.size()));
  clients.clear();
  // Once the clients are gone it serves again.
  std::string who;
  for (int i = 0; i < 100 && who != "a"; ++i) {
    who = http_get(gateway->port(), "/who");
    if (who != "a") std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(who, "a");
  EXPECT_TRUE(gateway->alive());
}

}  // namespace
}  // namespace ucp::test
