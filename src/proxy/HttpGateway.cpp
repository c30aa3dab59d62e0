#include "ucp/proxy/HttpGateway.h"

#include <algorithm>

namespace ucp::proxy {

HttpGateway::HttpGateway(HttpGatewayOptions options)
    : options_(std::move(options)),
      upstreams_(UpstreamsOptions{options_.loop.backend, options_.resolver}),
      proxy_(options_.proxy, upstreams_),
      server_(options_.server, options_.loop, proxy_.handler()) {}

HttpGateway::~HttpGateway() {
  // The control thread posts to the workers: it ends before their loops do.
  upstreams_.stop();
}

Result<void, Error> HttpGateway::check(const HttpProxyOptions& proxy,
                                       const std::vector<UpstreamGroupOptions>& upstreams) {
  if (auto valid = validate(upstreams); !valid) return valid;
  if (auto valid = validate(proxy.routes); !valid) return valid;
  auto known = [&](const std::string& name) {
    return std::any_of(upstreams.begin(), upstreams.end(),
                       [&](const auto& group) { return group.name == name; });
  };
  const auto invalid = std::make_error_code(std::errc::invalid_argument);
  if (!proxy.default_upstream.empty() && !known(proxy.default_upstream)) {
    return Unexpected{Error(
        "gateway.upstream: no upstream group named '" + proxy.default_upstream + "'", invalid)};
  }
  for (const HttpRoute& route : proxy.routes) {
    if (!known(route.upstream)) {
      return Unexpected{Error(
          "route." + route.name + ".upstream: no upstream group named '" + route.upstream + "'",
          invalid)};
    }
  }
  return {};
}

Result<void, Error> HttpGateway::start(std::string* warnings) {
  if (auto valid = check(options_.proxy, options_.upstreams); !valid) return valid;
  if (auto started = server_.start(warnings); !started) return started;
  const std::vector<EventLoop*> workers = server_.worker_loops();
  if (auto started = upstreams_.start(workers, options_.upstreams); !started) return started;
  return proxy_.attach(workers);
}

void HttpGateway::run() {
  server_.run();
  upstreams_.stop();
}

Result<void, Error> HttpGateway::reconfigure(HttpProxyOptions proxy,
                                             std::vector<UpstreamGroupOptions> upstreams) {
  if (auto valid = check(proxy, upstreams); !valid) return valid;
  return upstreams_.reconfigure(std::move(upstreams),
                                proxy_.reconfigure_with_upstreams(std::move(proxy)));
}

}  // namespace ucp::proxy
