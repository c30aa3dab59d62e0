#pragma once
// HttpMetrics: what an HttpServer tells Prometheus about itself, turned on with
// HttpServer::enable_metrics() and served on a path of your choice with serve_metrics():
//
//   ucp::http::HttpServer server(server_options, loop_options, http_options);
//   ucp::metrics::Registry& registry = server.enable_metrics();   // before start()
//   registry.add("app_logins", "Logins.", {}, logins);            // your own beside them
//   server.serve_metrics("/internal/metrics");                     // GET, Prometheus text
//
// The families (docs/metrics.md, "HTTP"), each series labelled by `worker` where it is per
// worker:
//   ucp_connections_open, ucp_connections_accepted_total,
//   ucp_http_requests_total{class="1xx".."5xx"}, ucp_bytes_received_total,
//   ucp_bytes_sent_total                          the server's counters (HttpServer::stats())
//   ucp_http_request_duration_seconds{route,method,code}   a histogram: from a request's
//                                                 arrival in full to its response handed to
//                                                 the kernel; route is the pattern
//                                                 ("/users/{id}"), "unmatched" for 404/405
//   ucp_loop_*_total                              each loop's backend counters (submit
//                                                 calls, operations, completion overflows,
//                                                 deferred and rejected submissions, busy
//                                                 retries, busy polls and their hits), and
//                                                 ucp_loop_info{backend=...}
//   ucp_tls_handshakes_total{result="ok"|"failed"}, ucp_tls_resumed_total,
//   ucp_tls_handshake_failures_total{reason}     with ServerOptions::tls only: each worker's
//                                                 TcpServer::tls_counters()
//   process_*, ucp_build_info                     ProcessMetrics.h
//
// Recording costs a clock read at each end of a request and a histogram observation into the
// worker's own shard (relaxed loads and stores: no lock, no locked instruction, no
// allocation); a server without enable_metrics() pays one branch per request.
//
// Thread contract: enable_metrics() and serve_metrics() on the thread that configures the
// server, before start(); the registry is then safe from any thread.

#include <cstddef>
#include <vector>

#include "ucp/metrics/Histogram.h"

namespace ucp::http {

struct HttpMetricsOptions {
  /// The `le` bounds of ucp_http_request_duration_seconds, in seconds.
  std::vector<double> duration_bounds = metrics::Histogram::latency_seconds_bounds();
  /// (method, code) pairs kept apart per route and worker; the pairs seen after these share
  /// one series (method="other", code="other"), so a client cannot grow the server's memory.
  size_t pairs_per_route = 8;
  /// process_* and ucp_build_info.
  bool process = true;
};

}  // namespace ucp::http
