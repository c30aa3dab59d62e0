#pragma once
// Per-loop slots (metric shards, a server's per-worker state) claimed by the loops that use them,
// in the order they first show up.

#include <atomic>
#include <cstddef>

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

/// The slot of `loop` among `count` slots (count >= 1), each owned by the loop stored in
/// `owner_of(i)` (a `std::atomic<const EventLoop*>&`, nullptr while free): the slot it claimed
/// before, else the first free one, claimed now (a race between two loops for one slot has one
/// winner; the other moves on), else the last one, shared by every loop past the count.
/// A short scan meant for once per connection or per thread, not per request.
template <class OwnerOf>
size_t claim_loop_slot(size_t count, const EventLoop& loop, OwnerOf&& owner_of) noexcept {
  for (size_t i = 0; i < count; ++i) {
    std::atomic<const EventLoop*>& owner = owner_of(i);
    const EventLoop* seen = owner.load(std::memory_order_acquire);
    if (seen == nullptr && owner.compare_exchange_strong(seen, &loop, std::memory_order_acq_rel)) {
      return i;
    }
    if (seen == &loop) return i;  // a failed claim leaves the winner in `seen`
  }
  return count - 1;
}

}  // namespace ucp::detail
