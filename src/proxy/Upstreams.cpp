#include "ucp/proxy/Upstreams.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "ucp/coro/StopToken.h"
#include "ucp/coro/WhenAll.h"
#include "ucp/io/Operations.h"
#include "ucp/io/ResumeOn.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/log/Logger.h"
#include "ucp/net/Resolver.h"
#include "ucp/proxy/HealthCheck.h"

namespace ucp::proxy {

// ---- the workers' side ----

GroupRef WorkerUpstreams::find(std::string_view name) const noexcept {
  for (const GroupRef& group : groups_) {
    if (group->name() == name) return group;
  }
  return {};
}

void WorkerUpstreams::install(const Set& set) {
  std::vector<GroupRef> groups;
  groups.reserve(set.size());
  for (const auto& snapshot : set) {
    GroupRef group = find(snapshot->options->name);
    if (!group) {
      group = GroupRef(std::make_unique<UpstreamGroup>(*this, snapshot->options->name).release());
    }
    group->install(snapshot);
    groups.push_back(std::move(group));
  }
  groups_ = std::move(groups);  // a removed group lives on while a connection holds it
}

// ---- the control thread's side ----

/// A group as the control thread keeps it.
struct Upstreams::Group {
  struct Health {
    bool down = false;
    uint32_t passes = 0;
    uint32_t failures = 0;
  };

  std::shared_ptr<const UpstreamGroupOptions> options;
  std::vector<std::vector<InetAddress>> resolved;  // per server
  std::vector<uint8_t> named;                      // per server: a host name, resolved here
  std::vector<uint8_t> resolve_failing;            // per server: its last lookup failed
  std::vector<UpstreamPeer> peers;
  std::shared_ptr<const MaglevTable> maglev;
  std::map<std::string, Health> health;                    // by address
  std::map<std::string, Clock::time_point> ejected_until;  // by address
  StopSource stop;  // ends its lookups and checks (control thread)
  bool retired = false;

  const std::string& name() const { return options->name; }
  std::shared_ptr<const GroupSnapshot> snapshot() const {
    auto s = std::make_shared<GroupSnapshot>();
    s->options = options;
    s->peers = peers;
    s->maglev = maglev;
    s->down.reserve(peers.size());
    s->ejected_until.reserve(peers.size());
    for (const UpstreamPeer& peer : peers) {
      const std::string key = peer.address.to_string();
      auto h = health.find(key);
      s->down.push_back(h != health.end() && h->second.down ? 1 : 0);
      auto e = ejected_until.find(key);
      s->ejected_until.push_back(e != ejected_until.end() ? e->second : Clock::time_point{});
    }
    return s;
  }
};

namespace {

std::optional<InetAddress> parse_numeric(const ServerSpec& server) {
  return InetAddress::parse(server.host, server.port);
}

std::string host_port(const ServerSpec& server) {
  if (server.host.find(':') != std::string::npos) {
    return "[" + server.host + "]:" + std::to_string(server.port);
  }
  return server.host + ":" + std::to_string(server.port);
}

std::string join(const std::vector<InetAddress>& addresses) {
  std::string text;
  for (const InetAddress& a : addresses) {
    if (!text.empty()) text += ", ";
    text += a.to_string();
  }
  return text;
}

}  // namespace

std::shared_ptr<Upstreams::Group> Upstreams::make_group(const UpstreamGroupOptions& options) {
  auto group = std::make_shared<Upstreams::Group>();
  group->options = std::make_shared<const UpstreamGroupOptions>(options);
  for (const ServerSpec& server : options.servers) {
    auto numeric = parse_numeric(server);
    group->resolved.push_back(numeric ? std::vector<InetAddress>{*numeric}
                                      : std::vector<InetAddress>{});
    group->named.push_back(numeric ? 0 : 1);
    group->resolve_failing.push_back(0);
  }
  return group;
}

Upstreams::Upstreams(UpstreamsOptions options) : options_(options) {}

Upstreams::~Upstreams() { stop(); }

WorkerUpstreams* Upstreams::on(EventLoop& worker) noexcept {
  for (auto& view : views_) {
    if (&view->loop() == &worker) return view.get();
  }
  return nullptr;
}

void Upstreams::rebuild(Group& group) {
  std::vector<UpstreamPeer> peers;
  const auto& servers = group.options->servers;
  for (size_t i = 0; i < servers.size(); ++i) {
    for (const InetAddress& address : group.resolved[i]) {
      const bool listed = std::any_of(peers.begin(), peers.end(),
                                      [&](const UpstreamPeer& p) { return p.address == address; });
      if (listed) continue;  // two servers naming one address: one peer
      UpstreamPeer peer;
      peer.address = address;
      peer.host = host_port(servers[i]);
      peer.name = group.named[i] ? peer.host + " (" + address.to_string() + ")" : peer.host;
      peer.weight = servers[i].weight;
      peers.push_back(std::move(peer));
    }
  }
  group.peers = std::move(peers);
  if (group.options->balance == Balance::kHash) {
    std::vector<std::string> names;
    std::vector<uint32_t> weights;
    for (const UpstreamPeer& peer : group.peers) {
      names.push_back(peer.address.to_string());  // the same address keeps its slots
      weights.push_back(peer.weight);
    }
    group.maglev = std::make_shared<const MaglevTable>(MaglevTable::build(names, weights));
  } else {
    group.maglev.reset();
  }
}

void Upstreams::publish(const WorkerUpdate& also) {
  auto set = std::make_shared<WorkerUpstreams::Set>();
  for (const auto& group : groups_) set->push_back(group->snapshot());
  for (auto& view : views_) {
    WorkerUpstreams* target = view.get();
    target->loop().post([target, set, also] {
      target->install(*set);
      if (also) also(*target);
    });
  }
  publications_.fetch_add(1, std::memory_order_relaxed);
}

Result<void, Error> Upstreams::start(std::vector<EventLoop*> workers,
                                     std::vector<UpstreamGroupOptions> groups) {
  if (control_) return Unexpected{Error("upstreams: started twice")};
  if (auto valid = validate(groups); !valid) return valid;
  for (EventLoop* loop : workers) views_.push_back(std::make_unique<WorkerUpstreams>(*this, *loop));
  for (const UpstreamGroupOptions& options : groups) {
    groups_.push_back(make_group(options));
    rebuild(*groups_.back());
  }
  // The workers serve nothing yet: their first copies are made here, directly. Every later
  // change reaches them through their loop's queue.
  WorkerUpstreams::Set set;
  for (const auto& group : groups_) set.push_back(group->snapshot());
  for (auto& view : views_) view->install(set);

  LoopOptions loop_options;
  loop_options.backend = options_.backend;
  loop_options.ring_entries = 256;
  std::string warnings;
  auto loop = EventLoop::create(loop_options, &warnings);
  if (!loop) {
    return Unexpected{Error("upstreams: cannot create the control loop: " +
                                EventLoop::describe_setup_error(loop.error(), loop_options),
                            loop.error())};
  }
  control_ = std::move(*loop);
  control_->post([this] {
    for (const auto& group : groups_) spawn_tasks(group);
  });
  thread_ = std::thread([this] { control_->run(); });
  return {};
}

void Upstreams::spawn_tasks(const std::shared_ptr<Group>& group) {
  const bool named =
      std::any_of(group->named.begin(), group->named.end(), [](uint8_t n) { return n != 0; });
  if (named) control_->spawn(resolve_loop(group));
  if (group->options->health.kind != HealthCheckKind::kNone) control_->spawn(health_loop(group));
}

bool Upstreams::post_to_control(UniqueFunction<void()> task) {
  std::lock_guard lock(control_mutex_);
  if (stopped_ || !control_) return false;
  control_->post(std::move(task));
  return true;
}

void Upstreams::stop() {
  {
    std::lock_guard lock(control_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (!control_) return;
  control_->stop();
  if (thread_.joinable()) thread_.join();
  // The lookups' and checks' frames go with the loop, while the groups they name still exist.
  control_.reset();
}

Result<void, Error> Upstreams::reconfigure(std::vector<UpstreamGroupOptions> groups,
                                           WorkerUpdate also) {
  if (auto valid = validate(groups); !valid) return valid;
  if (!post_to_control([this, groups = std::move(groups), also = std::move(also)]() mutable {
        apply(std::move(groups), also);
      })) {
    return Unexpected{
        Error("upstreams: not running", std::make_error_code(std::errc::operation_canceled))};
  }
  return {};
}

void Upstreams::apply(std::vector<UpstreamGroupOptions> groups, const WorkerUpdate& also) {
  std::vector<std::shared_ptr<Group>> next;
  size_t added = 0, changed = 0, kept = 0;
  for (const UpstreamGroupOptions& options : groups) {
    auto old = std::find_if(groups_.begin(), groups_.end(),
                            [&](const auto& g) { return g->name() == options.name; });
    if (old != groups_.end() && *(*old)->options == options) {
      next.push_back(*old);
      ++kept;
      continue;
    }
    auto group = make_group(options);
    if (old != groups_.end()) {
      // Same name, new options: the state of the addresses that stay carries over, and a
      // name that was resolved keeps its addresses until its next lookup.
      Group& previous = **old;
      group->health = previous.health;
      group->ejected_until = previous.ejected_until;
      for (size_t i = 0; i < options.servers.size(); ++i) {
        for (size_t j = 0; j < previous.options->servers.size(); ++j) {
          const ServerSpec& a = options.servers[i];
          const ServerSpec& b = previous.options->servers[j];
          if (group->named[i] && a.host == b.host && a.port == b.port) {
            group->resolved[i] = previous.resolved[j];
          }
        }
      }
      ++changed;
    } else {
      ++added;
    }
    rebuild(*group);
    spawn_tasks(group);
    next.push_back(std::move(group));
  }
  size_t removed = 0;
  for (const auto& old : groups_) {
    if (std::find(next.begin(), next.end(), old) != next.end()) continue;
    old->retired = true;
    old->stop.request_stop();
    removed += std::none_of(groups.begin(), groups.end(),
                            [&](const auto& o) { return o.name == old->name(); });
  }
  groups_ = std::move(next);
  publish(also);
  LOG_INFO("upstreams reconfigured: {} groups ({} unchanged, {} changed, {} added, {} removed)",
           groups_.size(), kept, changed, added, removed);
}

Task<> Upstreams::resolve_once(Group& group) {
  Resolver& resolver = options_.resolver != nullptr ? *options_.resolver : Resolver::shared();
  bool changed = false;
  const auto& servers = group.options->servers;
  for (size_t i = 0; i < servers.size() && !group.retired; ++i) {
    if (!group.named[i]) continue;
    auto answer = co_await with_stop(resolver.resolve(*control_, servers[i].host, servers[i].port),
                                     group.stop.token());
    if (group.retired) co_return;
    if (!answer) {
      if (!group.resolve_failing[i]) {
        LOG_WARN("upstream {}: cannot resolve {}: {} (keeping {} address(es); trying again)",
                 group.name(), host_port(servers[i]), answer.error().message(),
                 group.resolved[i].size());
      }
      group.resolve_failing[i] = 1;
      continue;
    }
    group.resolve_failing[i] = 0;
    std::vector<InetAddress> addresses;
    for (const InetAddress& a : *answer) {
      if (std::find(addresses.begin(), addresses.end(), a) == addresses.end()) {
        addresses.push_back(a);
      }
    }
    if (addresses != group.resolved[i]) {
      LOG_INFO("upstream {}: {} resolves to {}", group.name(), host_port(servers[i]),
               join(addresses));
      group.resolved[i] = std::move(addresses);
      changed = true;
    }
  }
  if (changed) {
    rebuild(group);
    publish();
  }
}

Task<> Upstreams::resolve_loop(std::shared_ptr<Group> group) {
  for (;;) {
    co_await resolve_once(*group);
    const uint32_t interval = group->options->resolve_interval_ms;
    if (group->retired || interval == 0) co_return;
    auto slept = co_await with_stop(io::sleep_for(*control_, std::chrono::milliseconds(interval)),
                                    group->stop.token());
    if (!slept) co_return;
  }
}

Task<> Upstreams::health_loop(std::shared_ptr<Group> group) {
  const UpstreamGroupOptions& options = *group->options;
  const HealthCheckOptions& health = options.health;
  const uint32_t timeout_ms = health.timeout_ms != 0
                                  ? health.timeout_ms
                                  : std::min(options.connect_timeout_ms, health.interval_ms);
  for (;;) {
    const std::vector<UpstreamPeer> peers = group->peers;
    std::vector<Task<HealthCheckResult>> checks;
    checks.reserve(peers.size());
    for (const UpstreamPeer& peer : peers) {
      checks.push_back(check_server(*control_, peer.address, peer.host, health, timeout_ms,
                                    options.proxy_protocol));
    }
    std::vector<HealthCheckResult> results = co_await when_all(std::move(checks));
    if (group->retired) co_return;
    bool changed = false;
    for (size_t i = 0; i < peers.size(); ++i) {
      Group::Health& state = group->health[peers[i].address.to_string()];
      if (results[i].passed) {
        state.failures = 0;
        ++state.passes;
        if (state.down && state.passes >= health.rise) {
          state.down = false;
          changed = true;
          LOG_INFO("upstream {}: server {} is up ({} health checks passed)", group->name(),
                   peers[i].name, state.passes);
        }
      } else {
        state.passes = 0;
        ++state.failures;
        if (!state.down && state.failures >= health.fall) {
          state.down = true;
          changed = true;
          LOG_WARN("upstream {}: server {} is down: {} ({} health checks failed)", group->name(),
                   peers[i].name, results[i].detail, state.failures);
        }
      }
    }
    if (changed) publish();
    auto slept =
        co_await with_stop(io::sleep_for(*control_, std::chrono::milliseconds(health.interval_ms)),
                           group->stop.token());
    if (!slept) co_return;
  }
}

void Upstreams::report_ejection(const std::string& group, const InetAddress& address,
                                Clock::time_point until, uint32_t failures) {
  post_to_control([this, group, address, until, failures] {
    auto found = std::find_if(groups_.begin(), groups_.end(),
                              [&](const auto& g) { return g->name() == group; });
    if (found == groups_.end()) return;
    Group& g = **found;
    Clock::time_point& ejected = g.ejected_until[address.to_string()];
    const Clock::time_point now = Clock::now();
    if (now >= ejected) {
      LOG_WARN("upstream {}: server {} ejected for {} ms after {} failed connects in a row", group,
               address.to_string(), g.options->fail_timeout_ms, failures);
    }
    ejected = std::max(ejected, until);
    publish();
  });
}

void Upstreams::report_recovery(const std::string& group, const InetAddress& address) {
  post_to_control([this, group, address] {
    auto found = std::find_if(groups_.begin(), groups_.end(),
                              [&](const auto& g) { return g->name() == group; });
    if (found == groups_.end()) return;
    Group& g = **found;
    auto ejected = g.ejected_until.find(address.to_string());
    if (ejected == g.ejected_until.end()) return;  // another worker told us already
    g.ejected_until.erase(ejected);
    LOG_INFO("upstream {}: server {} is back (a connect succeeded)", group, address.to_string());
    publish();
  });
}

Task<std::vector<GroupStats>> Upstreams::collect_stats(EventLoop& home) {
  std::vector<GroupStats> stats;
  EventLoop* control = nullptr;
  {
    std::lock_guard lock(control_mutex_);
    if (!stopped_) control = control_.get();
  }
  if (control == nullptr) co_return stats;
  co_await resume_on(*control);
  const Clock::time_point now = Clock::now();
  for (const auto& group : groups_) {
    const auto snapshot = group->snapshot();
    GroupStats g;
    g.name = group->name();
    for (size_t i = 0; i < snapshot->peers.size(); ++i) {
      PeerStats p;
      p.name = snapshot->peers[i].name;
      p.address = snapshot->peers[i].address;
      p.weight = snapshot->peers[i].weight;
      p.down = snapshot->down[i] != 0;
      p.ejected = now < snapshot->ejected_until[i];
      g.peers.push_back(std::move(p));
    }
    stats.push_back(std::move(g));
  }
  for (auto& view : views_) {
    co_await resume_on(view->loop());
    for (GroupStats& g : stats) {
      GroupRef group = view->find(g.name);
      if (!group) continue;
      for (PeerStats& p : g.peers) {
        for (size_t i = 0; i < group->size(); ++i) {
          const PeerState& peer = group->peer(i);
          if (!(peer.address() == p.address)) continue;
          p.active += peer.active;
          p.connects += peer.connects();
          p.connect_failures += peer.connect_failures();
          p.connect_time_us += peer.connect_time_us();
        }
      }
    }
  }
  co_await resume_on(home);
  co_return stats;
}

}  // namespace ucp::proxy
