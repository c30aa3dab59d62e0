#pragma once
// HttpProxy's inside: the settings a worker uses (options and their route table), one worker's
// state per upstream group (its keep-alive pool and counts), and one request's exchange.
// Private to src/proxy.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "ucp/coro/StopToken.h"
#include "ucp/http/ConnectionPool.h"
#include "ucp/proxy/HttpProxy.h"
#include "ucp/proxy/Relay.h"

namespace ucp::proxy {

namespace detail {

/// One worker's counts for one group: written and read on that worker's thread only
/// (collect_stats visits each worker to read them).
struct GroupCounters {
  uint64_t requests = 0;
  uint64_t responses[5] = {};
  uint64_t no_server = 0;
  uint64_t connect_errors = 0;
  uint64_t bad_gateway = 0;
  uint64_t gateway_timeouts = 0;
  uint64_t connections_made = 0;
  uint64_t connections_reused = 0;
  uint64_t active = 0;
};

/// A response the gateway makes itself (404, 502...).
Task<Result<void>> send_status(TcpConnection& client, int status, bool keep_alive,
                               int client_minor);
/// FIN, then read and drop what the client still sends for at most `timeout_ms`.
Task<> linger(TcpConnection& client, uint32_t timeout_ms);

}  // namespace detail

struct HttpProxy::Settings {
  explicit Settings(HttpProxyOptions o)
      : options(std::move(o)), routes(options.routes, options.default_upstream) {}
  HttpProxyOptions options;
  RouteTable routes;
};

struct HttpProxy::Group {
  explicit Group(EventLoop& loop) : pool(loop) {}
  http::ConnectionPool pool;  // keyed by server (and client, with the PROXY protocol)
  detail::GroupCounters counters;
};

/// A client connection waiting for its next request: linked into its worker's list meanwhile,
/// so that a drain can end the wait. Lives in the connection's frame.
struct HttpProxy::IdleWait {
  StopSource stop;
  Worker* worker = nullptr;
  IdleWait* prev = nullptr;
  IdleWait* next = nullptr;
  bool linked = false;
  ~IdleWait();
};

struct HttpProxy::Worker {
  EventLoop* loop = nullptr;
  WorkerUpstreams* upstreams = nullptr;
  std::shared_ptr<const Settings> settings;  // the worker's thread only
  std::map<std::string, std::shared_ptr<Group>, std::less<>> groups;
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> not_found{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> upgrades{0};
  Clock::time_point last_warning{};
  bool draining = false;  // drain(): answers end their connections
  IdleWait* idle = nullptr;
  // The group group_state() found last, by the address of its name in the settings that named
  // it (held here, so that the address cannot come to name another). Reset when the groups
  // change.
  struct LastGroup {
    std::shared_ptr<const Settings> settings;
    const std::string* name = nullptr;
    std::shared_ptr<Group> state;
  };
  LastGroup last_group;

  void link(IdleWait& wait) noexcept {
    wait.worker = this;
    wait.prev = nullptr;
    wait.next = idle;
    if (idle != nullptr) idle->prev = &wait;
    idle = &wait;
    wait.linked = true;
  }
  void unlink(IdleWait& wait) noexcept {
    if (!wait.linked) return;
    (wait.prev != nullptr ? wait.prev->next : idle) = wait.next;
    if (wait.next != nullptr) wait.next->prev = wait.prev;
    wait.linked = false;
  }

  static void bump(std::atomic<uint64_t>& counter) noexcept { RelayCounters::add(counter, 1); }
  /// The state of group `name` on this worker, made on first use.
  std::shared_ptr<Group> group_state(std::string_view name) {
    auto it = groups.find(name);
    if (it == groups.end()) {
      it = groups.emplace(std::string(name), std::make_shared<Group>(*loop)).first;
    }
    return it->second;
  }
  /// The same, for the group `named_by` names `name` (a string of theirs): the group of the
  /// request before is most often the next one's, and is found without the lookup by name.
  std::shared_ptr<Group> group_state(const std::shared_ptr<const Settings>& named_by,
                                     const std::string& name) {
    if (last_group.name != &name || last_group.settings != named_by) {
      last_group = {named_by, &name, group_state(name)};
    }
    return last_group.state;
  }
  /// Failures come in floods (a group whose servers are all down): one line a second.
  bool warn_allowed(Clock::time_point now) {
    if (now - last_warning < std::chrono::seconds(1)) return false;
    last_warning = now;
    return true;
  }
};

inline HttpProxy::IdleWait::~IdleWait() {
  if (worker != nullptr) worker->unlink(*this);
}

/// What a client connection keeps from one request to the next: the heads are written into
/// these, whose capacity stays (no allocation per request once they have grown).
struct HttpProxy::Scratch {
  std::string upstream_head;
  std::string client_head;
};

/// One request on its way: where it came from, where it goes.
struct HttpProxy::Exchange {
  TcpConnection& client;
  http::RequestReader& reader;
  const InetAddress& address;
  const std::string& ip;
  const Settings& settings;
  GroupRef group;
  std::shared_ptr<Group> state;
  Scratch& scratch;
};

}  // namespace ucp::proxy
