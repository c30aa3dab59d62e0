#include "Metrics.h"

#include <vector>

namespace ucp::app {
namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

void header(std::string& out, const Family& family) {
  out.append("# HELP ").append(family.name).append(" ").append(family.help).append("\n");
  out.append("# TYPE ").append(family.name).append(" ").append(family.type).append("\n");
}

void sample(std::string& out, const char* name, size_t worker, const char* extra_label,
            uint64_t value) {
  out.append(name).append("{worker=\"").append(std::to_string(worker)).append("\"");
  if (extra_label != nullptr) out.append(",").append(extra_label);
  out.append("} ").append(std::to_string(value)).append("\n");
}

}  // namespace

void render_metrics(const http::HttpServer& server, std::string& out) {
  const std::vector<http::WorkerStats> workers = server.stats();
  header(out, {"ucp_connections_open", "gauge", "Connections open now."});
  for (size_t w = 0; w < workers.size(); ++w) {
    sample(out, "ucp_connections_open", w, nullptr, workers[w].connections_open);
  }
  header(out, {"ucp_connections_accepted_total", "counter", "Connections accepted."});
  for (size_t w = 0; w < workers.size(); ++w) {
    sample(out, "ucp_connections_accepted_total", w, nullptr, workers[w].connections_accepted);
  }
  header(out, {"ucp_http_requests_total", "counter",
               "HTTP responses sent, by status class (errors the server answered itself "
               "included)."});
  constexpr const char* kClasses[] = {"class=\"2xx\"", "class=\"3xx\"", "class=\"4xx\"",
                                      "class=\"5xx\""};
  for (size_t w = 0; w < workers.size(); ++w) {
    sample(out, "ucp_http_requests_total", w, "class=\"1xx\"", workers[w].informational);
    for (size_t c = 0; c < 4; ++c) {
      sample(out, "ucp_http_requests_total", w, kClasses[c], workers[w].responses[c]);
    }
  }
  header(out, {"ucp_bytes_received_total", "counter", "Bytes received from clients."});
  for (size_t w = 0; w < workers.size(); ++w) {
    sample(out, "ucp_bytes_received_total", w, nullptr, workers[w].bytes_received);
  }
  header(out, {"ucp_bytes_sent_total", "counter", "Bytes sent to clients."});
  for (size_t w = 0; w < workers.size(); ++w) {
    sample(out, "ucp_bytes_sent_total", w, nullptr, workers[w].bytes_sent);
  }
}

}  // namespace ucp::app
