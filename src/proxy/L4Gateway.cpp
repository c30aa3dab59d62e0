#include "ucp/proxy/L4Gateway.h"

#include <algorithm>

namespace ucp::proxy {

L4Gateway::L4Gateway(L4GatewayOptions options)
    : options_(std::move(options)),
      upstreams_(UpstreamsOptions{options_.loop.backend, options_.resolver}),
      proxy_(options_.proxy, upstreams_),
      server_(options_.server, options_.loop, proxy_.handler()) {}

L4Gateway::~L4Gateway() {
  // The control thread posts to the workers: it ends before their loops do.
  upstreams_.stop();
}

Result<void, Error> L4Gateway::check(const TcpProxyOptions& proxy,
                                     const std::vector<UpstreamGroupOptions>& upstreams) {
  if (auto valid = validate(upstreams); !valid) return valid;
  const bool found = std::any_of(upstreams.begin(), upstreams.end(),
                                 [&](const auto& group) { return group.name == proxy.upstream; });
  if (!found) {
    return Unexpected{Error("gateway.upstream: no upstream group named '" + proxy.upstream + "'",
                            std::make_error_code(std::errc::invalid_argument))};
  }
  return {};
}

Result<void, Error> L4Gateway::start(std::string* warnings) {
  if (auto valid = check(options_.proxy, options_.upstreams); !valid) return valid;
  if (auto started = server_.start(warnings); !started) return started;
  const std::vector<EventLoop*> workers = server_.worker_loops();
  if (auto started = upstreams_.start(workers, options_.upstreams); !started) return started;
  return proxy_.attach(workers);
}

void L4Gateway::run() {
  server_.run();
  upstreams_.stop();
}

Result<void, Error> L4Gateway::reconfigure(TcpProxyOptions proxy,
                                           std::vector<UpstreamGroupOptions> upstreams) {
  if (auto valid = check(proxy, upstreams); !valid) return valid;
  return upstreams_.reconfigure(std::move(upstreams),
                                proxy_.reconfigure_with_upstreams(std::move(proxy)));
}

}  // namespace ucp::proxy
