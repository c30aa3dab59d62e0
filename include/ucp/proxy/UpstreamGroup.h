#pragma once
// UpstreamGroup: one worker's copy of an upstream group, the object a connection asks for a
// server. The process-wide group lives on the control thread (Upstreams: names resolved, health
// checked, ejections shared); each worker gets immutable GroupSnapshots from it and keeps the
// state that changes per connection here, on its own thread: active connections, consecutive
// failures, the round-robin weights. So picking a server and counting a connection touch no
// lock and no atomic, and no cache line another worker writes.
//
//   GroupRef group = upstreams.on(loop).find("app");
//   PeerLease peer = group->pick(client_address, tried, loop.now());   // empty: none available
//   ... connect to peer->address() ...
//   group->report_failure(*peer, loop.now());   // or report_success(*peer, connect_time)
//
// A PeerLease counts one connection as active on its server until it is dropped, and keeps the
// server's state alive even when a new snapshot (a reconfiguration, a name resolving to other
// addresses) no longer lists it, so a connection established before a change ends cleanly
// after it. Groups themselves are held by GroupRef for the same reason.
//
// Thread contract: the worker's loop thread only (snapshots arrive through EventLoop::post).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ucp/io/Timer.h"
#include "ucp/net/InetAddress.h"
#include "ucp/proxy/Balancer.h"
#include "ucp/proxy/MaglevTable.h"
#include "ucp/proxy/UpstreamConfig.h"

namespace ucp::proxy {

class WorkerUpstreams;

/// One address of a configured server, as every worker sees it.
struct UpstreamPeer {
  InetAddress address;
  std::string name;  // "10.0.0.7:8080", or "app.internal:8080 (10.0.0.7)" for a resolved name
  std::string host;  // the server as configured, HOST:PORT (an HTTP health check's Host)
  uint32_t weight = 1;
};

/// A group as the control thread publishes it: immutable, shared by every worker.
struct GroupSnapshot {
  std::shared_ptr<const UpstreamGroupOptions> options;
  std::vector<UpstreamPeer> peers;
  std::shared_ptr<const MaglevTable> maglev;     // Balance::kHash, over `peers`
  std::vector<uint8_t> down;                     // per peer: failing its active health checks
  std::vector<Clock::time_point> ejected_until;  // per peer: passive ejection, for all workers
};

/// One worker's state of one server address.
class PeerState : public BalancerPeer {
 public:
  explicit PeerState(const UpstreamPeer& peer) : address_(peer.address), name_(peer.name) {
    weight = peer.weight;
  }
  PeerState(const PeerState&) = delete;
  PeerState& operator=(const PeerState&) = delete;

  const InetAddress& address() const noexcept { return address_; }
  const std::string& name() const noexcept { return name_; }
  /// This worker's counters since the address first appeared in the group.
  uint64_t connects() const noexcept { return connects_; }
  uint64_t connect_failures() const noexcept { return connect_failures_; }
  uint64_t connect_time_us() const noexcept { return connect_time_us_; }  // sum over connects()
  uint32_t consecutive_failures() const noexcept { return fails_; }

 private:
  friend class UpstreamGroup;
  friend class PeerLease;
  friend class PeerHold;
  void unref() noexcept;

  InetAddress address_;
  std::string name_;
  uint32_t refs_ = 0;   // the group's (while listed) + one per PeerLease
  uint32_t fails_ = 0;  // consecutive failed connects
  Clock::time_point ejected_until_{};
  uint64_t connects_ = 0;
  uint64_t connect_failures_ = 0;
  uint64_t connect_time_us_ = 0;
};

/// A group's own hold on a listed peer (no active count).
class PeerHold {
 public:
  explicit PeerHold(PeerState* peer) noexcept : peer_(peer) { ++peer_->refs_; }
  PeerHold(PeerHold&& other) noexcept : peer_(std::exchange(other.peer_, nullptr)) {}
  PeerHold& operator=(PeerHold&& other) noexcept {
    std::swap(peer_, other.peer_);
    return *this;
  }
  PeerHold(const PeerHold&) = delete;
  PeerHold& operator=(const PeerHold&) = delete;
  ~PeerHold() {
    if (peer_) peer_->unref();
  }
  PeerState* get() const noexcept { return peer_; }
  PeerState* operator->() const noexcept { return peer_; }

 private:
  PeerState* peer_;
};

/// One connection's claim on a server: counted active (least_conn) until dropped. Move-only.
class PeerLease {
 public:
  PeerLease() noexcept = default;
  explicit PeerLease(PeerState& peer) noexcept : peer_(&peer) {
    ++peer.refs_;
    ++peer.active;
  }
  PeerLease(PeerLease&& other) noexcept : peer_(std::exchange(other.peer_, nullptr)) {}
  PeerLease& operator=(PeerLease&& other) noexcept {
    if (this != &other) {
      reset();
      peer_ = std::exchange(other.peer_, nullptr);
    }
    return *this;
  }
  PeerLease(const PeerLease&) = delete;
  PeerLease& operator=(const PeerLease&) = delete;
  ~PeerLease() { reset(); }

  void reset() noexcept;
  explicit operator bool() const noexcept { return peer_ != nullptr; }
  PeerState* get() const noexcept { return peer_; }
  PeerState* operator->() const noexcept { return peer_; }
  PeerState& operator*() const noexcept { return *peer_; }

 private:
  PeerState* peer_ = nullptr;
};

class GroupRef;

class UpstreamGroup {
 public:
  UpstreamGroup(WorkerUpstreams& owner, std::string name);
  UpstreamGroup(const UpstreamGroup&) = delete;
  UpstreamGroup& operator=(const UpstreamGroup&) = delete;
  ~UpstreamGroup();

  const std::string& name() const noexcept { return name_; }
  const UpstreamGroupOptions& options() const noexcept { return *snapshot_->options; }
  /// Addresses in the group (every server's, once its name has resolved).
  size_t size() const noexcept { return peers_.size(); }
  const PeerState& peer(size_t i) const noexcept { return *peers_[i].get(); }
  /// Whether peer i may take a connection at `now` (not ejected, not failing health checks).
  bool available(size_t i, Clock::time_point now) const noexcept;
  size_t available_count(Clock::time_point now) const noexcept;

  /// Chooses a server for a client at `client` by the group's balance, among those available
  /// at `now` whose address is not in `tried`. Empty when none is left.
  PeerLease pick(const InetAddress& client, std::span<const InetAddress> tried,
                 Clock::time_point now);
  /// A connect to `peer` failed: max_fails in a row eject it, on every worker, for
  /// fail_timeout_ms. After an ejection the next failure ejects it again at once; a success
  /// clears it (report_success).
  void report_failure(PeerState& peer, Clock::time_point now);
  void report_success(PeerState& peer, Clock::duration connect_time);

  /// The snapshot in use (tests, stats).
  const GroupSnapshot& snapshot() const noexcept { return *snapshot_; }
  /// Takes a new snapshot of this group, keeping the state of addresses that stay.
  void install(std::shared_ptr<const GroupSnapshot> snapshot);

 private:
  friend class GroupRef;
  bool usable(size_t i, std::span<const InetAddress> tried, Clock::time_point now) const noexcept;

  WorkerUpstreams& owner_;
  std::string name_;
  std::shared_ptr<const GroupSnapshot> snapshot_;
  std::vector<PeerHold> peers_;  // parallel to snapshot_->peers
  std::vector<PeerState*> balance_view_;
  uint32_t refs_ = 0;
};

/// Keeps a worker's UpstreamGroup alive (a connection may outlive the group's removal).
class GroupRef {
 public:
  GroupRef() noexcept = default;
  explicit GroupRef(UpstreamGroup* group) noexcept : group_(group) {
    if (group_) ++group_->refs_;
  }
  GroupRef(const GroupRef& other) noexcept : GroupRef(other.group_) {}
  GroupRef(GroupRef&& other) noexcept : group_(std::exchange(other.group_, nullptr)) {}
  GroupRef& operator=(GroupRef other) noexcept {
    std::swap(group_, other.group_);
    return *this;
  }
  ~GroupRef();

  explicit operator bool() const noexcept { return group_ != nullptr; }
  UpstreamGroup* get() const noexcept { return group_; }
  UpstreamGroup* operator->() const noexcept { return group_; }
  UpstreamGroup& operator*() const noexcept { return *group_; }

 private:
  UpstreamGroup* group_ = nullptr;
};

/// The IP address part of `address` (an IPv4-mapped IPv6 address as IPv4), for the hash.
uint64_t hash_client(const InetAddress& address) noexcept;

}  // namespace ucp::proxy
