#pragma once
// Upstreams: a process's upstream groups, shared by all its workers.
//
//   ucp::proxy::Upstreams upstreams;
//   upstreams.start(server.worker_loops(), groups);        // after server.start(), before run()
//   // on a worker, per connection:
//   GroupRef group = upstreams.on(connection.loop()).find("app");
//   // from a signal handler's thread (SIGHUP):
//   if (auto bad = upstreams.reconfigure(new_groups); !bad) LOG_ERROR("{}", bad.error().message);
//
// How one group is shared without a lock on the connection path: one control thread (its own
// EventLoop) owns each group's shared facts: the addresses its host names resolve to (resolved
// again every resolve_interval_ms, never on a worker), the active health checks and their
// up/down state, and passive ejections. Whenever one changes it publishes an immutable
// GroupSnapshot per group to every worker (EventLoop::post of a shared_ptr). Each worker keeps
// its own UpstreamGroup built from the snapshots, holding what changes per connection: active
// counts, consecutive failures, round-robin weights. Picking a server and counting a connection
// touch only the worker's own memory. A worker whose connects to a server fail max_fails times
// ejects it locally at once and tells the control thread, which logs the ejection once and
// publishes it, so the other workers stop trying that server too. The price is that the counts
// least_conn balances on are per worker (as nginx's without a shared zone), which the
// kernel's spreading of connections over workers keeps close.
//
// reconfigure() replaces the whole set: groups with the same name and options stay as they are,
// changed ones keep the health and ejection state of the addresses that remain, removed ones
// disappear from the workers' lookups. Connections already established hold their group and
// server state (GroupRef, PeerLease) and end normally.
//
// Thread contract: start() once, on the thread that owns the worker loops, before they serve;
// reconfigure() and stop() from any thread; on() and what it returns on that worker's thread;
// collect_stats() from any loop's thread while the workers run. stop() (or the destructor)
// must run before the worker loops are destroyed: the control thread posts to them.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/proxy/UpstreamConfig.h"
#include "ucp/proxy/UpstreamGroup.h"

namespace ucp {
class Resolver;
}

namespace ucp::proxy {

class Upstreams;

/// One worker's copies of every group (Upstreams::on).
class WorkerUpstreams {
 public:
  WorkerUpstreams(Upstreams& upstreams, EventLoop& loop) : upstreams_(upstreams), loop_(loop) {}
  WorkerUpstreams(const WorkerUpstreams&) = delete;
  WorkerUpstreams& operator=(const WorkerUpstreams&) = delete;

  /// The group called `name`; empty when there is none.
  GroupRef find(std::string_view name) const noexcept;
  EventLoop& loop() const noexcept { return loop_; }
  size_t size() const noexcept { return groups_.size(); }

 private:
  friend class Upstreams;
  friend class UpstreamGroup;
  using Set = std::vector<std::shared_ptr<const GroupSnapshot>>;
  void install(const Set& set);

  Upstreams& upstreams_;
  EventLoop& loop_;
  std::vector<GroupRef> groups_;
};

struct UpstreamsOptions {
  /// The control thread's loop: its backend (auto, io_uring or epoll, like the workers').
  BackendKind backend = BackendKind::kAuto;
  /// Host name lookups; null: Resolver::shared().
  Resolver* resolver = nullptr;
};

/// One server address of a group, summed over the workers (collect_stats).
struct PeerStats {
  std::string name;
  InetAddress address;
  uint32_t weight = 1;
  bool down = false;     // failing its active health checks
  bool ejected = false;  // passive ejection in force
  uint64_t active = 0;   // connections through it now
  uint64_t connects = 0;
  uint64_t connect_failures = 0;
  uint64_t connect_time_us = 0;  // summed over connects
};

struct GroupStats {
  std::string name;
  std::vector<PeerStats> peers;
};

class Upstreams {
 public:
  explicit Upstreams(UpstreamsOptions options = {});
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;
  /// Stops the control thread (stop()).
  ~Upstreams();

  /// Validates `groups`, makes every worker's copies and starts the control thread, which
  /// resolves host names and runs the health checks. Numeric servers are usable at once; a
  /// group of host names has no server until its first lookup answers.
  Result<void, Error> start(std::vector<EventLoop*> workers,
                            std::vector<UpstreamGroupOptions> groups);
  /// What runs on each worker's thread together with its installation of a new set, in the
  /// same task: a connection sees both changes or neither.
  using WorkerUpdate = std::function<void(WorkerUpstreams&)>;
  /// Validates `groups` here (an invalid set changes nothing: the error says why), then
  /// replaces the running set on the control thread, which publishes it to the workers (and
  /// runs `also` on each, right after it installs the set).
  Result<void, Error> reconfigure(std::vector<UpstreamGroupOptions> groups, WorkerUpdate also = {});
  /// Ends the control thread: no more lookups, checks or publications; the workers keep the
  /// groups they have. Idempotent.
  void stop();

  /// The worker's copies (null for a loop that is not one of the workers).
  WorkerUpstreams* on(EventLoop& worker) noexcept;
  /// Every group's servers: health state from the control thread, counts summed over the
  /// workers. The coroutine visits the control thread and each worker's in turn, then comes
  /// back to `home`, the loop that awaits it. Empty once stop() has run.
  Task<std::vector<GroupStats>> collect_stats(EventLoop& home);

  /// Snapshots sets published to the workers so far (any thread; for tests).
  uint64_t publications() const noexcept { return publications_.load(std::memory_order_relaxed); }

 private:
  friend class UpstreamGroup;
  struct Group;
  static std::shared_ptr<Group> make_group(const UpstreamGroupOptions& options);
  void publish(const WorkerUpdate& also = {});
  Task<> resolve_loop(std::shared_ptr<Group> group);
  Task<> health_loop(std::shared_ptr<Group> group);
  Task<> resolve_once(Group& group);
  void rebuild(Group& group);
  void apply(std::vector<UpstreamGroupOptions> groups, const WorkerUpdate& also);
  void spawn_tasks(const std::shared_ptr<Group>& group);
  /// From a worker: a server was ejected there (or came back), for the others to know.
  void report_ejection(const std::string& group, const InetAddress& address,
                       Clock::time_point until, uint32_t failures);
  void report_recovery(const std::string& group, const InetAddress& address);
  bool post_to_control(UniqueFunction<void()> task);

  UpstreamsOptions options_;
  std::vector<std::unique_ptr<WorkerUpstreams>> views_;
  std::vector<std::shared_ptr<Group>> groups_;  // control thread (after start)
  std::mutex control_mutex_;                    // guards posting against stop()
  bool stopped_ = false;                        // under control_mutex_
  std::unique_ptr<EventLoop> control_;
  std::thread thread_;
  std::atomic<uint64_t> publications_{0};
};

}  // namespace ucp::proxy
