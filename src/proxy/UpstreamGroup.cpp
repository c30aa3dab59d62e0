#include "ucp/proxy/UpstreamGroup.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "ucp/proxy/Upstreams.h"

namespace ucp::proxy {

void PeerState::unref() noexcept {
  if (--refs_ != 0) return;
  std::unique_ptr<PeerState> last(this);  // the last holder lets go
}

void PeerLease::reset() noexcept {
  if (peer_ == nullptr) return;
  --peer_->active;
  std::exchange(peer_, nullptr)->unref();
}

GroupRef::~GroupRef() {
  if (group_ == nullptr || --group_->refs_ != 0) return;
  std::unique_ptr<UpstreamGroup> last(group_);
}

uint64_t hash_client(const InetAddress& address) noexcept {
  const sockaddr* any = address.get();
  if (any->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(any);
    return hash_bytes(std::as_bytes(std::span(&v4->sin_addr, 1)));
  }
  if (any->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(any);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {  // the same client on a dual-stack listener
      return hash_bytes(std::as_bytes(std::span(v6->sin6_addr.s6_addr + 12, 4)));
    }
    return hash_bytes(std::as_bytes(std::span(&v6->sin6_addr, 1)));
  }
  return 0;
}

UpstreamGroup::UpstreamGroup(WorkerUpstreams& owner, std::string name)
    : owner_(owner), name_(std::move(name)) {}

UpstreamGroup::~UpstreamGroup() = default;

void UpstreamGroup::install(std::shared_ptr<const GroupSnapshot> snapshot) {
  std::vector<PeerHold> peers;
  peers.reserve(snapshot->peers.size());
  for (const UpstreamPeer& peer : snapshot->peers) {
    auto same = std::find_if(peers_.begin(), peers_.end(), [&](const PeerHold& held) {
      return held.get() != nullptr && held->address() == peer.address;
    });
    if (same != peers_.end()) {
      (*same)->weight = peer.weight;
      (*same)->name_ = peer.name;
      peers.push_back(std::move(*same));  // leaves an empty hold behind
      continue;
    }
    peers.emplace_back(std::make_unique<PeerState>(peer).release());
  }
  peers_ = std::move(peers);  // addresses no longer listed live on while a lease holds them
  balance_view_.clear();
  for (const PeerHold& held : peers_) balance_view_.push_back(held.get());
  snapshot_ = std::move(snapshot);
}

bool UpstreamGroup::available(size_t i, Clock::time_point now) const noexcept {
  if (snapshot_->down[i] != 0) return false;
  if (now < snapshot_->ejected_until[i]) return false;
  return now >= peers_[i]->ejected_until_;
}

size_t UpstreamGroup::available_count(Clock::time_point now) const noexcept {
  size_t n = 0;
  for (size_t i = 0; i < peers_.size(); ++i) n += available(i, now);
  return n;
}

bool UpstreamGroup::usable(size_t i, std::span<const InetAddress> tried,
                           Clock::time_point now) const noexcept {
  if (!available(i, now)) return false;
  return std::find(tried.begin(), tried.end(), peers_[i]->address()) == tried.end();
}

PeerLease UpstreamGroup::pick(const InetAddress& client, std::span<const InetAddress> tried,
                              Clock::time_point now) {
  const auto usable_now = [&](size_t i) { return usable(i, tried, now); };
  int32_t chosen = -1;
  switch (options().balance) {
    case Balance::kRoundRobin:
      chosen = pick_round_robin(balance_view_, usable_now);
      break;
    case Balance::kLeastConn:
      chosen = pick_least_conn(balance_view_, usable_now);
      break;
    case Balance::kHash:
      chosen = snapshot_->maglev
                   ? pick_hash(*snapshot_->maglev, peers_.size(), hash_client(client), usable_now)
                   : pick_round_robin(balance_view_, usable_now);
      break;
  }
  if (chosen < 0) return {};
  return PeerLease(*peers_[static_cast<size_t>(chosen)].get());
}

void UpstreamGroup::report_failure(PeerState& peer, Clock::time_point now) {
  ++peer.connect_failures_;
  ++peer.fails_;
  const UpstreamGroupOptions& group = options();
  if (group.max_fails == 0 || peer.fails_ < group.max_fails) return;
  const bool newly = now >= peer.ejected_until_;
  peer.ejected_until_ = now + std::chrono::milliseconds(group.fail_timeout_ms);
  if (newly)
    owner_.upstreams_.report_ejection(name_, peer.address(), peer.ejected_until_, peer.fails_);
}

void UpstreamGroup::report_success(PeerState& peer, Clock::duration connect_time) {
  ++peer.connects_;
  peer.connect_time_us_ += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(connect_time).count());
  const uint32_t max_fails = options().max_fails;
  if (max_fails > 0 && peer.fails_ >= max_fails) {
    peer.ejected_until_ = {};
    owner_.upstreams_.report_recovery(name_, peer.address());
  }
  peer.fails_ = 0;
}

}  // namespace ucp::proxy
