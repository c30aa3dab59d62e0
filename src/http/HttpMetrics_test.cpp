// HttpServer's metrics over real loopback connections: the Prometheus endpoint on a path of
// the user's choice, request durations by route, method and code, the server's and the
// loops' counters, process_* and build info, promtool's verdict, and scrapes while other
// threads make requests on two workers (TSan: label threads).

#include "ucp/http/HttpMetrics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/http/HttpServer.h"
#include "ucp/metrics/Counter.h"
#include "ucp/metrics/LatencyHistogram.h"
#include "ucp/metrics/Registry.h"

#include "HttpTestServer.h"
#include "Promtool.h"

namespace ucp::http {
namespace {

using test::ask;
using test::ask_once;
using test::HttpTestServer;

std::string get(std::string_view target) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: a\r\n\r\n";
}

/// The value of the sample `series` (its name and labels exactly as rendered), or -1.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

void routes(HttpServer& server) {
  server.router().get("/users/{id}",
                      [](Request&, Response& res) -> Task<> { co_return res.text("user"); });
  server.router().post("/users",
                       [](Request&, Response& res) -> Task<> { co_return res.text("made", 201); });
  server.router().get("/code/{n}", [](Request& req, Response& res) -> Task<> {
    co_return res.reply(std::stoi(std::string(req.param("n"))));
  });
}

TEST(HttpMetrics, ServedOnAPathOfTheUsersChoice) {
  metrics::Counter logins;
  HttpTestServer s([&](HttpServer& server) {
    routes(server);
    metrics::Registry& registry = server.enable_metrics();
    ASSERT_TRUE(registry.add("app_logins", "Logins.", {}, logins));
    server.serve_metrics("/internal/metrics");
  });
  logins.add(0, 3);
  auto fd = test::connect_loopback(s.port());
  ASSERT_TRUE(fd);
  std::string pending;
  for (int i = 0; i < 3; ++i) ask(fd->get(), get("/users/" + std::to_string(i)), pending);
  ask(fd->get(), "HEAD /users/7 HTTP/1.1\r\nHost: a\r\n\r\n", pending, true);
  ask(fd->get(), "POST /users HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", pending);
  EXPECT_EQ(ask(fd->get(), get("/nope"), pending).status, 404);
  EXPECT_EQ(ask(fd->get(), "DELETE /users/1 HTTP/1.1\r\nHost: a\r\n\r\n", pending).status, 405);
  EXPECT_EQ(ask(fd->get(), get("/code/503"), pending).status, 503);
  auto scrape = ask(fd->get(), get("/internal/metrics"), pending);
  ASSERT_EQ(scrape.status, 200);
  EXPECT_EQ(scrape.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = scrape.body;
  const std::string d = "ucp_http_request_duration_seconds";
  EXPECT_EQ(sample(text, d + "_count{route=\"/users/{id}\",method=\"GET\",code=\"200\"}"), 3)
      << text;
  EXPECT_EQ(sample(text, d + "_count{route=\"/users/{id}\",method=\"HEAD\",code=\"200\"}"), 1);
  EXPECT_EQ(sample(text, d + "_count{route=\"/users\",method=\"POST\",code=\"201\"}"), 1);
  EXPECT_EQ(sample(text, d + "_count{route=\"unmatched\",method=\"GET\",code=\"404\"}"), 1);
  EXPECT_EQ(sample(text, d + "_count{route=\"unmatched\",method=\"DELETE\",code=\"405\"}"), 1);
  EXPECT_EQ(sample(text, d + "_count{route=\"/code/{n}\",method=\"GET\",code=\"503\"}"), 1);
  EXPECT_EQ(sample(text, d + "_bucket{route=\"/users\",method=\"POST\",code=\"201\",le=\"+Inf\"}"),
            1);
  EXPECT_GT(sample(text, d + "_sum{route=\"/users/{id}\",method=\"GET\",code=\"200\"}"), 0);
  // The server's counters, under bin/http_server's names (the scrape itself not yet counted).
  EXPECT_EQ(sample(text, "ucp_http_requests_total{worker=\"0\",class=\"2xx\"}"), 5);
  EXPECT_EQ(sample(text, "ucp_http_requests_total{worker=\"0\",class=\"4xx\"}"), 2);
  EXPECT_EQ(sample(text, "ucp_http_requests_total{worker=\"0\",class=\"5xx\"}"), 1);
  EXPECT_EQ(sample(text, "ucp_connections_open{worker=\"0\"}"), 1);
  EXPECT_EQ(sample(text, "ucp_connections_accepted_total{worker=\"0\"}"), 1);
  EXPECT_GT(sample(text, "ucp_bytes_received_total{worker=\"0\"}"), 0);
  EXPECT_GT(sample(text, "ucp_bytes_sent_total{worker=\"0\"}"), 0);
  // The loops', the process's, the build's, the application's own.
  EXPECT_GT(sample(text, "ucp_loop_submit_calls_total{worker=\"0\"}"), 0);
  EXPECT_GT(sample(text, "ucp_loop_operations_submitted_total{worker=\"main\"}"), 0);
  // auto runs io_uring where it can, else epoll.
  const bool epoll = test::backend_under_test() == BackendKind::kEpoll;
  const double on_epoll = sample(text, "ucp_loop_info{worker=\"0\",backend=\"epoll\"}");
  const double on_io_uring = sample(text, "ucp_loop_info{worker=\"0\",backend=\"io_uring\"}");
  EXPECT_EQ(epoll ? on_epoll : std::max(on_epoll, on_io_uring), 1) << text;
  EXPECT_GT(sample(text, "process_resident_memory_bytes"), 0);
  EXPECT_GT(sample(text, "process_open_fds"), 0);
  EXPECT_NE(text.find("\nucp_build_info{version=\""), std::string::npos);
  EXPECT_EQ(sample(text, "app_logins_total"), 3);
  // The next scrape counts the first one.
  auto again = ask(fd->get(), get("/internal/metrics"), pending);
  EXPECT_EQ(
      sample(again.body, d + "_count{route=\"/internal/metrics\",method=\"GET\",code=\"200\"}"), 1);
  if (!test::promtool_installed()) GTEST_SKIP() << test::kPromtoolMissing;
  const auto [code, said] = test::promtool(again.body);
  EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << again.body;
  EXPECT_EQ(said, "") << again.body;
}

TEST(HttpMetrics, PairsPastTheSlotsShareOneSeries) {
  HttpTestServer s([](HttpServer& server) {
    routes(server);
    server.enable_metrics({.pairs_per_route = 2, .process = false});
    server.serve_metrics();
  });
  for (const int code : {200, 201, 202, 203, 201, 204}) {
    ask_once(s.port(), get("/code/" + std::to_string(code)));
  }
  const std::string text = ask_once(s.port(), get("/metrics")).body;
  const std::string d = "ucp_http_request_duration_seconds_count{route=\"/code/{n}\",method=";
  EXPECT_EQ(sample(text, d + "\"GET\",code=\"200\"}"), 1) << text;
  EXPECT_EQ(sample(text, d + "\"GET\",code=\"201\"}"), 2);
  EXPECT_EQ(sample(text, d + "\"other\",code=\"other\"}"), 3);  // 202, 203, 204
  EXPECT_EQ(text.find("process_"), std::string::npos);          // .process = false
  // The same durations at LatencyHistogram's resolution, for percentiles: the six requests and
  // the scrape (recorded just after its answer went out: a bounded wait for it).
  std::optional<metrics::LatencyHistogram> latency;
  for (int i = 0; i < 500; ++i) {
    latency = s.server().request_latency();
    if (!latency || latency->count() >= 7) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(latency);
  EXPECT_EQ(latency->count(), 7u);
  EXPECT_GT(latency->value_at_percentile(99), 0);
}

TEST(HttpMetrics, NoneWithoutEnableMetrics) {
  HttpTestServer s(routes);
  EXPECT_EQ(ask_once(s.port(), get("/users/1")).status, 200);
  EXPECT_FALSE(s.server().request_latency());
  EXPECT_EQ(ask_once(s.port(), get("/metrics")).status, 404);
}

TEST(HttpMetrics, ScrapesWhileTwoWorkersServe) {
  HttpTestServer s(
      [](HttpServer& server) {
        routes(server);
        server.serve_metrics();
      },
      {}, 4 << 20, 2);
  constexpr int kClients = 2;
  constexpr int kRequests = 200;
  std::atomic<int> finished{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      auto fd = test::connect_loopback(s.port());
      std::string pending;
      for (int i = 0; fd && i < kRequests; ++i) {
        if (ask(fd->get(), get("/users/1"), pending).status != 200) break;
      }
      finished.fetch_add(1, std::memory_order_relaxed);
    });
  }
  double last = 0;
  const std::string series =
      "ucp_http_request_duration_seconds_count{route=\"/users/{id}\",method=\"GET\",code=\"200\"}";
  while (finished.load(std::memory_order_relaxed) < kClients) {
    const auto reply = ask_once(s.port(), get("/metrics"));
    ASSERT_EQ(reply.status, 200);
    const double seen = std::max(sample(reply.body, series), 0.0);
    EXPECT_GE(seen, last);  // counts only grow
    last = seen;
  }
  for (auto& client : clients) client.join();
  const std::string text = ask_once(s.port(), get("/metrics")).body;
  EXPECT_EQ(sample(text, series), kClients * kRequests) << text;
  EXPECT_NE(text.find("ucp_loop_info{worker=\"1\""), std::string::npos) << text;
}

}  // namespace
}  // namespace ucp::http
