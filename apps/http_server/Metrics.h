#pragma once
// Metrics: the Prometheus text exposition (format 0.0.4) of an HttpServer's per-worker
// counters, for GET /metrics. Each series is labelled with its worker; the counters are
// each worker's own (written without locks by that worker), read here from the handler's.

#include <string>

#include "ucp/http/HttpServer.h"

namespace ucp::app {

/// Content-Type of the exposition.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// Appends the exposition of `server`'s counters to `out`.
void render_metrics(const http::HttpServer& server, std::string& out);

}  // namespace ucp::app
