// The HTTP mode's connection loop: requests read from the client, routed, refused or answered
// with the gateway's own status; and its state and counts. One request's way to a server and
// back is HttpExchange.cpp.

#include "ucp/proxy/HttpProxy.h"

#include <algorithm>
#include <chrono>

#include "ucp/http/Url.h"
#include "ucp/io/ResumeOn.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"
#include "ucp/proxy/Relay.h"

#include "HttpForwarding.h"
#include "HttpProxyState.h"

namespace ucp::proxy {

using http::RequestReader;

HttpProxy::HttpProxy(HttpProxyOptions options, Upstreams& upstreams)
    : options_(std::move(options)), upstreams_(upstreams) {}

HttpProxy::~HttpProxy() = default;

Result<void, Error> HttpProxy::attach(const std::vector<EventLoop*>& workers) {
  auto settings = std::make_shared<const Settings>(options_);
  for (EventLoop* loop : workers) {
    auto worker = std::make_unique<Worker>();
    worker->loop = loop;
    worker->upstreams = upstreams_.on(*loop);
    if (worker->upstreams == nullptr) {
      return Unexpected{Error("http proxy: a worker loop the upstreams were not started with")};
    }
    worker->settings = settings;
    workers_.push_back(std::move(worker));
  }
  return {};
}

HttpProxy::Worker* HttpProxy::worker_for(EventLoop& loop) const noexcept {
  for (const auto& worker : workers_) {
    if (worker->loop == &loop) return worker.get();
  }
  return nullptr;
}

Upstreams::WorkerUpdate HttpProxy::reconfigure_with_upstreams(HttpProxyOptions options) {
  auto settings = std::make_shared<const Settings>(std::move(options));
  return [this, settings](WorkerUpstreams& view) {
    Worker* w = worker_for(view.loop());
    if (w == nullptr) return;
    w->settings = settings;
    w->last_group = {};
    // Pools of groups that are gone close their idle connections; requests in flight hold
    // their group's state and finish.
    for (auto it = w->groups.begin(); it != w->groups.end();) {
      if (!view.find(it->first)) {
        it->second->pool.clear();
        it = w->groups.erase(it);
      } else {
        ++it;
      }
    }
  };
}

void HttpProxy::drain() noexcept {
  for (auto& worker : workers_) {
    Worker* w = worker.get();
    w->loop->post([w] {
      w->draining = true;
      for (IdleWait* wait = w->idle; wait != nullptr;) {
        IdleWait* next = wait->next;
        wait->stop.request_stop();  // its reader's wait ends (resumed later, not here)
        wait = next;
      }
    });
  }
}

// ---- the connection ----

namespace detail {

Task<Result<void>> send_status(TcpConnection& client, int status, bool keep_alive,
                               int client_minor) {
  std::string text;
  append_status_response(text, status, keep_alive, client_minor);
  co_return co_await client.write_all(std::span(text.data(), text.size()));
}

Task<> linger(TcpConnection& client, uint32_t timeout_ms) {
  // FIN first, so the client reads the answer; then what it still sends is read and dropped
  // (bounded), so that closing with unread bytes does not send a reset that destroys it.
  client.shutdown_write();
  const Clock::time_point due = client.loop().now() + std::chrono::milliseconds(timeout_ms);
  BufferLease dropped;
  for (;;) {
    auto n = co_await with_deadline(client.receive_into(dropped), due);
    dropped.reset();
    if (!n || *n == 0) break;
  }
}

}  // namespace detail

Task<> HttpProxy::serve(TcpConnection& client) {
  Worker* worker = worker_for(client.loop());
  if (worker == nullptr) co_return;
  Worker::bump(worker->connections);
  const std::shared_ptr<const Settings> settings = worker->settings;
  const HttpProxyOptions& options = settings->options;
  client.set_read_timeout_ms(0);  // the reader's own deadlines govern
  client.set_write_timeout_ms(options.send_timeout_ms);
  // A multishot accept gives no peer address: the forwarding fields need it.
  InetAddress address = client.peer();
  if (address.family() == AF_UNSPEC) address = InetAddress::peer_of(client.fd()).value_or(address);
  const std::string ip = detail::client_ip(address);
  RequestReader reader(client, options.requests);
  IdleWait wait;
  Scratch scratch;
  for (;;) {
    if (worker->draining) break;
    worker->link(wait);
    const RequestReader::Status status = co_await reader.next(wait.stop.token());
    worker->unlink(wait);
    if (status == RequestReader::Status::kClosed) break;
    if (status == RequestReader::Status::kRefused) {
      Worker::bump(worker->refused);
      LOG_DEBUG("http proxy {}: {} ({})", ip, reader.error_status(), reader.error_reason());
      if (co_await detail::send_status(client, reader.error_status(), false, 1)) {
        co_await detail::linger(client, options.linger_timeout_ms);
      }
      break;
    }
    Worker::bump(worker->requests);
    // The settings of the moment: a reconfiguration applies from the next request on.
    const std::shared_ptr<const Settings> now = worker->settings;
    Route routed = route(*worker, *now, reader.request());
    bool keep = false;
    if (routed.status != 0) {
      keep = co_await answer(client, reader, *worker, *now, routed.status);
    } else {
      // Awaited from here (no coroutine between): one frame less per request.
      Exchange exchange{client,
                        reader,
                        address,
                        ip,
                        *now,
                        std::move(routed.group),
                        worker->group_state(now, *routed.upstream),
                        scratch};
      keep = co_await forward(*worker, exchange);
    }
    if (!keep) break;
  }
}

HttpProxy::Route HttpProxy::route(Worker& worker, const Settings& settings,
                                  const http::Request& request) {
  // Routes compare the path as a server would see it: decoded once, dot segments removed.
  std::string path;
  if (request.path() == "*") {
    path = "*";  // OPTIONS *: only the default group
  } else {
    std::string decoded;
    if (!http::percent_decode(request.path(), decoded) || !http::normalize_path(decoded, path)) {
      Worker::bump(worker.refused);
      return Route{.status = 400};
    }
  }
  const std::string* upstream = settings.routes.match(request.host(), path);
  if (upstream == nullptr) {
    Worker::bump(worker.not_found);
    return Route{.status = 404};
  }
  GroupRef group = worker.upstreams->find(*upstream);
  if (!group) {  // validation makes routes name groups; a worker between two sets may lack one
    return Route{.status = 503};
  }
  return Route{.status = 0, .upstream = upstream, .group = std::move(group)};
}

Task<bool> HttpProxy::answer(TcpConnection& client, RequestReader& reader, Worker& worker,
                             const Settings& settings, int status) {
  // An answer of the gateway's own keeps the connection only when the request is all read.
  const http::Request& request = reader.request();
  const bool keep = request.keep_alive() && reader.body_complete() && !worker.draining;
  if (!co_await detail::send_status(client, status, keep, request.version_minor())) {
    co_return false;
  }
  if (!keep) co_await detail::linger(client, settings.options.linger_timeout_ms);
  co_return keep;
}

// ---- counts ----

std::vector<HttpProxyStats> HttpProxy::stats() const {
  std::vector<HttpProxyStats> all;
  const auto read = [](const std::atomic<uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  for (const auto& w : workers_) {
    HttpProxyStats s;
    s.connections = read(w->connections);
    s.requests = read(w->requests);
    s.not_found = read(w->not_found);
    s.refused = read(w->refused);
    s.upgrades = read(w->upgrades);
    all.push_back(s);
  }
  return all;
}

HttpProxyStats HttpProxy::total() const {
  HttpProxyStats sum;
  for (const HttpProxyStats& s : stats()) {
    sum.connections += s.connections;
    sum.requests += s.requests;
    sum.not_found += s.not_found;
    sum.refused += s.refused;
    sum.upgrades += s.upgrades;
  }
  return sum;
}

Task<std::vector<HttpUpstreamStats>> HttpProxy::collect_stats(EventLoop& home) {
  std::vector<HttpUpstreamStats> all;
  for (const auto& worker : workers_) {
    co_await resume_on(*worker->loop);
    for (const auto& [name, group] : worker->groups) {
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const HttpUpstreamStats& s) { return s.upstream == name; });
      if (it == all.end()) {
        all.push_back(HttpUpstreamStats{});
        it = all.end() - 1;
        it->upstream = name;
      }
      const detail::GroupCounters& c = group->counters;
      it->requests += c.requests;
      for (size_t i = 0; i < 5; ++i) it->responses[i] += c.responses[i];
      it->no_server += c.no_server;
      it->connect_errors += c.connect_errors;
      it->bad_gateway += c.bad_gateway;
      it->gateway_timeouts += c.gateway_timeouts;
      it->connections_made += c.connections_made;
      it->connections_reused += c.connections_reused;
      it->pool_idle += group->pool.idle();
      it->active += c.active;
    }
  }
  co_await resume_on(home);
  co_return all;
}

}  // namespace ucp::proxy
