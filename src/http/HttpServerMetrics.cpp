// HttpServer's metrics: enable_metrics() and serve_metrics(), and the collectors that render
// the server's counters and its loops' at every scrape (HttpMetrics.h lists the families).

#include <string>

#include "ucp/http/HttpMetrics.h"
#include "ucp/http/HttpServer.h"
#include "ucp/metrics/Exposition.h"
#include "ucp/metrics/LatencyHistogram.h"
#include "ucp/metrics/ProcessMetrics.h"
#include "ucp/tls/TlsCounters.h"
#include "ucp/tls/TlsError.h"

#include "ServerCore.h"

namespace ucp::http {
namespace {

using metrics::Exposition;
using metrics::MetricType;

metrics::Labels worker_label(size_t worker) { return {{"worker", std::to_string(worker)}}; }

/// The counters HttpServer::stats() reads, under the names bin/http_server has always used.
void write_server_counters(const std::vector<WorkerStats>& workers, Exposition& out) {
  out.family("ucp_connections_open", MetricType::kGauge, "Connections open now.");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_connections_open", worker_label(w), workers[w].connections_open);
  }
  out.family("ucp_connections_accepted_total", MetricType::kCounter, "Connections accepted.");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_connections_accepted_total", worker_label(w), workers[w].connections_accepted);
  }
  out.family("ucp_http_requests_total", MetricType::kCounter,
             "HTTP responses sent, by status class (errors the server answered itself "
             "included).");
  constexpr const char* kClasses[] = {"2xx", "3xx", "4xx", "5xx"};
  for (size_t w = 0; w < workers.size(); ++w) {
    metrics::Labels labels = worker_label(w);
    labels.push_back({"class", "1xx"});
    out.sample("ucp_http_requests_total", labels, workers[w].informational);
    for (size_t c = 0; c < 4; ++c) {
      labels.back().value = kClasses[c];
      out.sample("ucp_http_requests_total", labels, workers[w].responses[c]);
    }
  }
  out.family("ucp_bytes_received_total", MetricType::kCounter, "Bytes received from clients.");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_bytes_received_total", worker_label(w), workers[w].bytes_received);
  }
  out.family("ucp_bytes_sent_total", MetricType::kCounter, "Bytes sent to clients.");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_bytes_sent_total", worker_label(w), workers[w].bytes_sent);
  }
}

struct LoopFamily {
  const char* name;
  const char* help;
  uint64_t LoopStats::*field;
};

constexpr LoopFamily kLoopFamilies[] = {
    {"ucp_loop_submit_calls_total",
     "Calls into the kernel to submit or wait (io_uring_enter, "
     "epoll_wait).",
     &LoopStats::submit_calls},
    {"ucp_loop_operations_submitted_total", "Operations handed to the kernel.",
     &LoopStats::operations_submitted},
    {"ucp_loop_completion_overflows_total",
     "Times completions waited in the kernel's overflow list (the completion queue was full).",
     &LoopStats::completion_overflows},
    {"ucp_loop_deferred_submissions_total",
     "Operations that waited in the loop's pending queue (the submission queue was full).",
     &LoopStats::deferred_submissions},
    {"ucp_loop_rejected_submissions_total",
     "Operations refused because the pending queue was full too.",
     &LoopStats::rejected_submissions},
    {"ucp_loop_busy_retries_total", "Submissions the kernel refused until completions were reaped.",
     &LoopStats::busy_retries},
    {"ucp_loop_busy_polls_total", "Times the loop spun for work (busy_poll_us) before sleeping.",
     &LoopStats::busy_polls},
    {"ucp_loop_busy_poll_hits_total", "Spins that found work: the loop did not sleep.",
     &LoopStats::busy_poll_hits},
};

/// The worker loops in TcpServer's order, each under the number the HTTP families use: its
/// counter slot (claimed here if the loop has not served yet, as it would claim it itself).
std::vector<std::pair<std::string, EventLoop*>> numbered_workers(detail::ServerCore& core,
                                                                 TcpServer& tcp) {
  std::vector<std::pair<std::string, EventLoop*>> loops;
  for (EventLoop* loop : tcp.worker_loops()) {
    loops.emplace_back(std::to_string(core.slot_for(*loop) - core.slots.get()), loop);
  }
  return loops;
}

/// Each loop's backend counters: the workers under their HTTP worker number, the main loop
/// as worker="main".
void write_loop_counters(detail::ServerCore& core, TcpServer& tcp, Exposition& out) {
  std::vector<std::pair<std::string, EventLoop*>> loops = numbered_workers(core, tcp);
  if (loops.empty()) return;  // not started
  loops.emplace_back("main", &tcp.main_loop());
  std::vector<LoopStats> stats;
  for (const auto& entry : loops) stats.push_back(entry.second->stats());
  for (const LoopFamily& family : kLoopFamilies) {
    out.family(family.name, MetricType::kCounter, family.help);
    for (size_t i = 0; i < loops.size(); ++i) {
      out.sample(family.name, {{"worker", loops[i].first}}, stats[i].*family.field);
    }
  }
  out.family("ucp_loop_info", MetricType::kGauge, "The backend each loop runs on (always 1).");
  for (const auto& [worker, loop] : loops) {
    out.sample("ucp_loop_info", {{"worker", worker}, {"backend", loop->backend_name()}},
               uint64_t{1});
  }
}

/// With TLS: each worker's handshake counters (TcpServer::tls_counters(), in the order of
/// worker_loops()), the failures also by reason.
void write_tls_counters(detail::ServerCore& core, TcpServer& tcp, Exposition& out) {
  const std::vector<std::pair<std::string, EventLoop*>> workers = numbered_workers(core, tcp);
  const std::vector<tls::TlsCounters> counters = tcp.tls_counters();
  if (workers.empty() || counters.size() != workers.size()) return;  // not started
  out.family("ucp_tls_handshakes_total", MetricType::kCounter,
             "TLS handshakes, by result (failed: refused, broken, timed out, not TLS).");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_tls_handshakes_total", {{"worker", workers[w].first}, {"result", "ok"}},
               counters[w].handshakes_ok);
    out.sample("ucp_tls_handshakes_total", {{"worker", workers[w].first}, {"result", "failed"}},
               counters[w].handshakes_failed_total());
  }
  out.family("ucp_tls_resumed_total", MetricType::kCounter,
             "TLS handshakes that resumed a session (a ticket): counted in result=\"ok\" too.");
  for (size_t w = 0; w < workers.size(); ++w) {
    out.sample("ucp_tls_resumed_total", {{"worker", workers[w].first}}, counters[w].resumed);
  }
  out.family("ucp_tls_handshake_failures_total", MetricType::kCounter,
             "Failed TLS handshakes, by reason (\"other\": errors outside the TLS layer).");
  for (size_t w = 0; w < workers.size(); ++w) {
    for (size_t reason = 0; reason < tls::kErrcCount; ++reason) {
      const uint64_t n = counters[w].handshakes_failed[reason];
      if (n == 0) continue;  // the reasons seen only: most never happen to a worker
      out.sample("ucp_tls_handshake_failures_total",
                 {{"worker", workers[w].first},
                  {"reason", std::string(tls::to_string(static_cast<tls::Errc>(reason)))}},
                 n);
    }
  }
}

}  // namespace

metrics::Registry& HttpServer::enable_metrics() { return enable_metrics(HttpMetricsOptions{}); }

metrics::Registry& HttpServer::enable_metrics(const HttpMetricsOptions& options) {
  if (core_->metrics) return core_->metrics->registry;
  core_->metrics = std::make_unique<detail::ServerMetrics>(options);
  metrics::Registry& registry = core_->metrics->registry;
  registry.add_collector([this](Exposition& out) {
    write_server_counters(stats(), out);
    if (core_->request_metrics != nullptr) core_->request_metrics->write(out);
    write_loop_counters(*core_, *tcp_, out);
    if (core_->tls) write_tls_counters(*core_, *tcp_, out);
  });
  if (options.process) {
    registry.add_collector(metrics::write_process_metrics);
    registry.add_collector(metrics::write_build_info);
  }
  return registry;
}

std::optional<metrics::LatencyHistogram> HttpServer::request_latency() const {
  if (core_->request_metrics == nullptr) return std::nullopt;
  return core_->request_metrics->merged_latency();
}

void HttpServer::serve_metrics(std::string_view path) {
  metrics::Registry& registry = enable_metrics();
  router().get(path, [&registry](Request&, Response& response) -> Task<> {
    response.set_content_type(metrics::kContentType);
    registry.render(response.body_buffer());
    co_return;
  });
}

}  // namespace ucp::http
