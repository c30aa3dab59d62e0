#pragma once
// ServerMetrics: what HttpServer::enable_metrics() turns on: the registry that the server's
// families (and the application's own) are rendered from, and the request durations recorded
// per worker. Private to src/http (HttpServerMetrics.cpp).

#include <memory>

#include "ucp/http/HttpMetrics.h"
#include "ucp/metrics/Registry.h"

#include "RequestMetrics.h"

namespace ucp::http::detail {

struct ServerMetrics {
  explicit ServerMetrics(HttpMetricsOptions o) : options(std::move(o)) {}
  HttpMetricsOptions options;
  metrics::Registry registry;
  std::unique_ptr<RequestMetrics> requests;  // built by start(), when the routes are known
};

}  // namespace ucp::http::detail
