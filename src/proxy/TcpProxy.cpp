#include "ucp/proxy/TcpProxy.h"

#include "ucp/log/Logger.h"
#include "ucp/proxy/ProxyProtocol.h"
#include "ucp/proxy/UpstreamConnector.h"

namespace ucp::proxy {
namespace {

void bump(std::atomic<uint64_t>& counter) noexcept { RelayCounters::add(counter, 1); }

}  // namespace

struct TcpProxy::Worker {
  EventLoop* loop = nullptr;
  WorkerUpstreams* upstreams = nullptr;
  std::shared_ptr<const TcpProxyOptions> options;  // the worker's thread only
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> active{0};
  std::atomic<uint64_t> relayed{0};
  std::atomic<uint64_t> no_server{0};
  std::atomic<uint64_t> proxy_header_refused{0};
  std::atomic<uint64_t> resets{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> errors{0};
  RelayCounters bytes;
  Clock::time_point last_warning{};

  // Connections that get no server come in floods (a group whose servers are all down): one
  // line a second per worker says so.
  bool warn_allowed(Clock::time_point now) {
    if (now - last_warning < std::chrono::seconds(1)) return false;
    last_warning = now;
    return true;
  }
};

TcpProxy::TcpProxy(TcpProxyOptions options, Upstreams& upstreams)
    : options_(std::move(options)), upstreams_(upstreams) {}

TcpProxy::~TcpProxy() = default;

Result<void, Error> TcpProxy::attach(const std::vector<EventLoop*>& workers) {
  auto options = std::make_shared<const TcpProxyOptions>(options_);
  for (EventLoop* loop : workers) {
    auto worker = std::make_unique<Worker>();
    worker->loop = loop;
    worker->upstreams = upstreams_.on(*loop);
    if (worker->upstreams == nullptr) {
      return Unexpected{Error("tcp proxy: a worker loop the upstreams were not started with")};
    }
    worker->options = options;
    workers_.push_back(std::move(worker));
  }
  return {};
}

TcpProxy::Worker* TcpProxy::worker_for(EventLoop& loop) const noexcept {
  for (const auto& worker : workers_) {
    if (worker->loop == &loop) return worker.get();
  }
  return nullptr;
}

void TcpProxy::reconfigure(TcpProxyOptions options) {
  auto shared = std::make_shared<const TcpProxyOptions>(std::move(options));
  for (auto& worker : workers_) {
    Worker* w = worker.get();
    w->loop->post([w, shared] { w->options = shared; });
  }
}

Upstreams::WorkerUpdate TcpProxy::reconfigure_with_upstreams(TcpProxyOptions options) {
  auto shared = std::make_shared<const TcpProxyOptions>(std::move(options));
  return [this, shared](WorkerUpstreams& view) {
    if (Worker* w = worker_for(view.loop())) w->options = shared;
  };
}

// Everything from the client's first byte to an upstream connection ready to relay: a child
// coroutine, so that what it needs on the way (the PROXY header, the addresses, the connect's
// state) is not kept in the frame that lives as long as the relay.
Task<std::optional<TcpProxy::Prepared>> TcpProxy::prepare(Worker& worker, TcpConnection& client) {
  // Everything this connection needs from the options is taken now: a reconfiguration may
  // replace them while it waits.
  const TcpProxyOptions& options = *worker.options;
  GroupRef group = worker.upstreams->find(options.upstream);
  const bool accept_proxy = options.accept_proxy_protocol;
  const uint32_t header_timeout_ms = options.proxy_header_timeout_ms;

  Prepared prepared;
  prepared.client = client.peer();
  InetAddress destination;
  if (accept_proxy) {
    auto header = co_await read_proxy_header(client, header_timeout_ms, prepared.first);
    if (!header) {
      bump(worker.proxy_header_refused);
      LOG_DEBUG("{}: no valid PROXY header: {}", prepared.client.to_string(),
                header.error().message());
      co_return std::nullopt;
    }
    if (!header->local) {
      prepared.client = header->source;
      destination = header->destination;
    }
  }
  if (!group) {
    bump(worker.no_server);
    if (worker.warn_allowed(client.loop().now())) {
      LOG_WARN("tcp proxy: no upstream group '{}': closing client connections",
               worker.options->upstream);
    }
    co_return std::nullopt;
  }
  const ProxyProtocolVersion send_header = group->options().proxy_protocol;
  // A multishot accept gives no peer address: ask the kernel, but only when it matters.
  if (prepared.client.family() == AF_UNSPEC &&
      (group->options().balance == Balance::kHash || send_header != ProxyProtocolVersion::kOff)) {
    prepared.client = InetAddress::peer_of(client.fd()).value_or(prepared.client);
  }
  auto upstream = co_await connect_upstream(client.loop(), group, prepared.client);
  if (!upstream) {
    bump(worker.no_server);
    if (worker.warn_allowed(client.loop().now())) {
      LOG_WARN("upstream {}: {}: closing client connections", group->name(),
               upstream.error().message());
    }
    co_return std::nullopt;
  }
  bump(worker.relayed);
  const UpstreamGroupOptions& now = group->options();
  prepared.relay = RelayOptions{now.idle_timeout_ms, now.total_timeout_ms};
  prepared.upstream = std::move(*upstream);
  if (send_header != ProxyProtocolVersion::kOff) {
    if (destination.family() == AF_UNSPEC) {
      destination = InetAddress::local_of(client.fd()).value_or(destination);
    }
    TcpConnection& server = *prepared.upstream.connection;
    if (!co_await write_proxy_header(server, send_header, prepared.client, destination)) {
      bump(worker.errors);
      co_await server.close();
      co_return std::nullopt;
    }
  }
  co_return std::optional<Prepared>(std::move(prepared));
}

Task<> TcpProxy::serve(TcpConnection& client) {
  Worker* worker = worker_for(client.loop());
  if (worker == nullptr) co_return;
  bump(worker->connections);
  bump(worker->active);
  struct Active {  // counted down also when the loop's shutdown destroys this frame
    std::atomic<uint64_t>& active;
    ~Active() {
      active.store(active.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
  } counted{worker->active};

  std::optional<Prepared> prepared = co_await prepare(*worker, client);
  if (!prepared) co_return;
  TcpConnection& server = *prepared->upstream.connection;
  const RelayResult result =
      co_await relay(client, server, prepared->relay, &worker->bytes, std::move(prepared->first));
  switch (result.end) {
    case RelayEnd::kClosed:
    case RelayEnd::kStopped:
      break;
    case RelayEnd::kClientReset:
    case RelayEnd::kUpstreamReset:
      bump(worker->resets);
      break;
    case RelayEnd::kIdleTimeout:
    case RelayEnd::kTotalTimeout:
      bump(worker->timeouts);
      break;
    case RelayEnd::kClientError:
    case RelayEnd::kUpstreamError:
      bump(worker->errors);
      break;
  }
  LOG_DEBUG("relay {} <-> {} ended: {}{}{} ({} bytes up, {} down)", prepared->client.to_string(),
            prepared->upstream.peer->name(), to_string(result.end), result.error ? ": " : "",
            result.error ? result.error.message() : std::string(), result.client_to_upstream,
            result.upstream_to_client);
  co_await server.close();
}

std::vector<TcpProxyStats> TcpProxy::stats() const {
  std::vector<TcpProxyStats> all;
  const auto read = [](const std::atomic<uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  for (const auto& w : workers_) {
    TcpProxyStats s;
    s.connections = read(w->connections);
    s.active = read(w->active);
    s.relayed = read(w->relayed);
    s.no_server = read(w->no_server);
    s.proxy_header_refused = read(w->proxy_header_refused);
    s.resets = read(w->resets);
    s.timeouts = read(w->timeouts);
    s.errors = read(w->errors);
    s.client_to_upstream_bytes = read(w->bytes.client_to_upstream);
    s.upstream_to_client_bytes = read(w->bytes.upstream_to_client);
    all.push_back(s);
  }
  return all;
}

TcpProxyStats TcpProxy::total() const {
  TcpProxyStats sum;
  for (const TcpProxyStats& s : stats()) {
    sum.connections += s.connections;
    sum.active += s.active;
    sum.relayed += s.relayed;
    sum.no_server += s.no_server;
    sum.proxy_header_refused += s.proxy_header_refused;
    sum.resets += s.resets;
    sum.timeouts += s.timeouts;
    sum.errors += s.errors;
    sum.client_to_upstream_bytes += s.client_to_upstream_bytes;
    sum.upstream_to_client_bytes += s.upstream_to_client_bytes;
  }
  return sum;
}

}  // namespace ucp::proxy
