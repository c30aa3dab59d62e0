#include "ucp/metrics/Registry.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ucp/metrics/ProcessMetrics.h"
#include "ucp/version.h"

#include "Promtool.h"

namespace ucp::metrics {
namespace {

using namespace std::chrono_literals;

TEST(Registry, RendersCountersWithTotalLabelsAndEscapes) {
  Registry registry;
  Counter ok(2);
  Counter odd(1);
  ok.add(0, 3);
  ok.add(1, 4);
  odd.add(0);
  ASSERT_TRUE(
      registry.add("http_responses", "Responses sent,\nby code \\ class.", {{"code", "200"}}, ok));
  ASSERT_TRUE(registry.add("http_responses", "Responses sent,\nby code \\ class.",
                           {{"code", "a\"b\\c\nd"}}, odd));
  EXPECT_EQ(registry.render(),
            "# HELP http_responses_total Responses sent,\\nby code \\\\ class.\n"
            "# TYPE http_responses_total counter\n"
            "http_responses_total{code=\"200\"} 7\n"
            "http_responses_total{code=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(Registry, AGaugeIsTheSumOfItsShards) {
  Registry registry;
  Gauge open(3);
  open.add(0, 5);
  open.add(1, 2);
  open.subtract(1, 1);
  open.set(2, 0.5);
  ASSERT_TRUE(registry.add("ucp_connections_open", "Connections open.", {}, open));
  EXPECT_EQ(registry.render(),
            "# HELP ucp_connections_open Connections open.\n"
            "# TYPE ucp_connections_open gauge\n"
            "ucp_connections_open 6.5\n");
}

TEST(Registry, RendersAHistogramAsCumulativeBucketsSumAndCount) {
  Registry registry;
  Histogram duration({0.5, 0.1, 1, 0.1}, 2);  // sorted and deduplicated: 0.1 0.5 1
  duration.observe(0, 0.05);
  duration.observe(1, 0.1);  // a bound counts in its own bucket (le: <=)
  duration.observe(0, 0.7);
  duration.observe(1, 3.0);
  duration.observe(0, 250ms);
  ASSERT_TRUE(
      registry.add("request_duration_seconds", "Request duration.", {{"route", "/"}}, duration));
  EXPECT_EQ(registry.render(),
            "# HELP request_duration_seconds Request duration.\n"
            "# TYPE request_duration_seconds histogram\n"
            "request_duration_seconds_bucket{route=\"/\",le=\"0.1\"} 2\n"
            "request_duration_seconds_bucket{route=\"/\",le=\"0.5\"} 3\n"
            "request_duration_seconds_bucket{route=\"/\",le=\"1\"} 4\n"
            "request_duration_seconds_bucket{route=\"/\",le=\"+Inf\"} 5\n"
            "request_duration_seconds_sum{route=\"/\"} 4.1\n"
            "request_duration_seconds_count{route=\"/\"} 5\n");
}

TEST(Registry, RendersLatencyHistogramShardsInSeconds) {
  Registry registry;
  std::vector<LatencyHistogram> shards(2);
  shards[0].record(std::chrono::microseconds(80));  // <= 100 µs
  shards[1].record(std::chrono::microseconds(300));
  shards[1].record(2ms);
  ASSERT_TRUE(registry.add("ucp_request_latency_seconds", "Request latency.", {}, shards,
                           {0.0001, 0.001, 0.01}));
  const std::string text = registry.render();
  EXPECT_NE(text.find("ucp_request_latency_seconds_bucket{le=\"0.0001\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ucp_request_latency_seconds_bucket{le=\"0.001\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ucp_request_latency_seconds_bucket{le=\"0.01\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("ucp_request_latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("ucp_request_latency_seconds_sum 0.00238\n"), std::string::npos);
  EXPECT_NE(text.find("ucp_request_latency_seconds_count 3\n"), std::string::npos);
}

TEST(Registry, RefusesBadNamesAndConflictsSayingWhy) {
  Registry registry;
  Counter c;
  Gauge g;
  Histogram h({1.0});
  auto refused = [](const Result<void, Error>& r, const char* says) {
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused(registry.add("2xx", "x", {}, c), "not a metric name");
  refused(registry.add("bad-name", "x", {}, c), "not a metric name");
  refused(registry.add("ok", "x", {{"bad-label", "v"}}, c), "not a label name");
  refused(registry.add("ok", "x", {{"__reserved", "v"}}, c), "not a label name");
  refused(registry.add("ok", "x", {{"a", "1"}, {"a", "2"}}, c), "appears twice");
  refused(registry.add("latency", "x", {{"le", "1"}}, h), "bucket label");
  EXPECT_EQ(registry.render(), "");  // nothing of the refused got in

  ASSERT_TRUE(registry.add("requests", "Requests.", {{"code", "200"}}, c));
  refused(registry.add("requests_total", "Requests.", {{"code", "200"}}, c), "registered already");
  refused(registry.add("requests", "Requests.", {{"method", "GET"}}, c), "have the labels (code)");
  refused(registry.add("requests_total", "Requests.", {}, g), "is a counter");
  Counter not_found;
  ASSERT_TRUE(registry.add("requests_total", "Requests.", {{"code", "404"}}, not_found));
  EXPECT_EQ(registry.render(),
            "# HELP requests_total Requests.\n# TYPE requests_total counter\n"
            "requests_total{code=\"200\"} 0\nrequests_total{code=\"404\"} 0\n");
}

TEST(Registry, RemovedMetricsAreNoLongerRendered) {
  Registry registry;
  Counter a;
  Counter b;
  ASSERT_TRUE(registry.add("a", "A.", {}, a));
  ASSERT_TRUE(registry.add("b", "B.", {{"x", "1"}}, b));
  registry.remove(a);
  EXPECT_EQ(registry.render(), "# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"1\"} 0\n");
  ASSERT_TRUE(registry.add("a", "A again.", {}, a));  // the family is gone: a fresh one
  EXPECT_NE(registry.render().find("# HELP a_total A again."), std::string::npos);
}

TEST(Registry, CollectorsWriteAfterTheRegisteredFamilies) {
  Registry registry;
  Counter a;
  ASSERT_TRUE(registry.add("a", "A.", {}, a));
  registry.add_collector([](Exposition& out) {
    out.family("extra", MetricType::kGauge, "Computed at scrape time.");
    out.sample("extra", {}, 2.5);
  });
  EXPECT_EQ(registry.render(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n"
            "# HELP extra Computed at scrape time.\n# TYPE extra gauge\nextra 2.5\n");
}

TEST(Exposition, FormatsNumbersAsPrometheusParsesThem) {
  EXPECT_EQ(Exposition::format_value(1.0), "1");
  EXPECT_EQ(Exposition::format_value(0.005), "0.005");
  EXPECT_EQ(Exposition::format_value(0.0001), "0.0001");
  EXPECT_EQ(Exposition::format_value(1e-7), "1e-07");
  EXPECT_EQ(Exposition::format_value(1234567890.0), "1234567890");
  EXPECT_EQ(Exposition::format_value(-2.5), "-2.5");
  EXPECT_EQ(Exposition::format_value(1e22), "1e+22");
  EXPECT_EQ(Exposition::format_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(Exposition::format_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(Exposition::format_value(0.0 / 0.0), "NaN");
}

TEST(ProcessMetrics, ReadsThisProcessFromProc) {
  const auto before = read_process_stats();
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(before->resident_bytes, 0u);
  EXPECT_GE(before->virtual_bytes, before->resident_bytes);
  EXPECT_GE(before->cpu_seconds, 0.0);
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(before->max_fds, limit.rlim_cur);
  // Started before now, and after the boot.
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(before->start_time_seconds, now + 1);
  EXPECT_GT(before->start_time_seconds, 1e9);

  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const auto after = read_process_stats();
  ::close(fd);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->open_fds, before->open_fds + 1);
}

TEST(ProcessMetrics, WritesTheStandardFamiliesAndBuildInfo) {
  std::string text;
  Exposition out(text);
  write_process_metrics(out);
  write_build_info(out);
  for (const char* family : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                             "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                             "process_start_time_seconds"}) {
    EXPECT_NE(text.find(std::string("\n") + family + " "), std::string::npos) << family;
  }
  EXPECT_NE(text.find(std::string("ucp_build_info{version=\"") + UCP_VERSION_STRING + "\"} 1\n"),
            std::string::npos)
      << text;
}

using test::promtool;

TEST(Registry, PromtoolAcceptsEverythingItRenders) {
  if (!test::promtool_installed()) GTEST_SKIP() << test::kPromtoolMissing;
  // promtool must be able to fail here, or the check below proves nothing.
  const auto bad = promtool("# HELP foo Foo.\n# TYPE foo counter\nfoo 1\n");
  ASSERT_NE(bad.first, 0) << "promtool accepted a counter without _total: " << bad.second;

  Registry registry;
  Counter requests(2);
  Counter requests_404(2);
  Gauge open(2);
  Histogram duration(Histogram::latency_seconds_bounds(), 2);
  std::vector<LatencyHistogram> latency(2);
  requests.add(0, 10);
  requests_404.add(1, 1);
  open.add(1, 3);
  duration.observe(0, 1.5ms);
  duration.observe(1, 20s);
  latency[0].record(40us);
  latency[1].record(3ms);
  ASSERT_TRUE(registry.add("ucp_http_requests", "HTTP requests answered.",
                           {{"code", "200"}, {"route", "/chat/{room}"}}, requests));
  ASSERT_TRUE(registry.add("ucp_http_requests", "HTTP requests answered.",
                           {{"code", "404"}, {"route", "a \"quoted\" \\ path\nwith newline"}},
                           requests_404));
  ASSERT_TRUE(registry.add("ucp_connections_open", "Connections open now.", {}, open));
  ASSERT_TRUE(registry.add("ucp_http_request_duration_seconds",
                           "Request duration, with\n"
                           "a second line and a \\ backslash.",
                           {{"code", "200"}}, duration));
  ASSERT_TRUE(registry.add("ucp_handler_latency_seconds", "Handler latency.", {}, latency));
  registry.add_collector(write_process_metrics);
  registry.add_collector(write_build_info);
  const std::string text = registry.render();
  const auto [code, said] = promtool(text);
  EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << text;
  EXPECT_EQ(said, "") << text;
}

}  // namespace
}  // namespace ucp::metrics
