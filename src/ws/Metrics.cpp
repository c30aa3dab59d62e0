#include "ucp/ws/Metrics.h"

#include "ucp/io/detail/LoopSlots.h"
#include "ucp/metrics/Registry.h"

namespace ucp::ws {
namespace {

std::atomic<uint64_t> next_id{1};

}  // namespace

Metrics::Metrics(size_t shards)
    : shards_(shards ? shards : 1),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      owners_(std::make_unique<std::atomic<const EventLoop*>[]>(shards_)),
      accepted_(shards_),
      open_(shards_),
      messages_in_(shards_),
      messages_out_(shards_),
      bytes_in_(shards_),
      bytes_out_(shards_) {}

Result<void, Error> Metrics::add_to(metrics::Registry& registry) {
  if (auto added = registry.add("ucp_websocket_connections", "WebSocket connections accepted.", {},
                                accepted_);
      !added) {
    return added;
  }
  if (auto added = registry.add("ucp_websocket_connections_open", "WebSocket connections open now.",
                                {}, open_);
      !added) {
    return added;
  }
  if (auto added = registry.add("ucp_websocket_messages_received", "WebSocket messages received.",
                                {}, messages_in_);
      !added) {
    return added;
  }
  if (auto added = registry.add("ucp_websocket_messages_sent",
                                "WebSocket messages handed to send() on an open connection.", {},
                                messages_out_);
      !added) {
    return added;
  }
  if (auto added = registry.add("ucp_websocket_bytes_received",
                                "WebSocket message payload bytes received (after inflation).", {},
                                bytes_in_);
      !added) {
    return added;
  }
  return registry.add("ucp_websocket_bytes_sent",
                      "WebSocket message payload bytes sent (before compression).", {}, bytes_out_);
}

size_t Metrics::shard(const EventLoop& loop) noexcept {
  // Once per thread: the thread's shard is remembered for the last Metrics it counted for.
  thread_local uint64_t memo_id = 0;
  thread_local size_t memo_shard = 0;
  if (memo_id == id_) return memo_shard;
  // More threads than shards: they share the last one.
  const size_t found =
      detail::claim_loop_slot(shards_, loop, [&](size_t i) -> auto& { return owners_[i]; });
  memo_id = id_;
  memo_shard = found;
  return found;
}

void Metrics::opened(const EventLoop& loop) noexcept {
  const size_t s = shard(loop);
  accepted_.add(s);
  open_.add(s, 1);
}

void Metrics::closed(const EventLoop& loop) noexcept { open_.subtract(shard(loop), 1); }

void Metrics::received(const EventLoop& loop, uint64_t bytes) noexcept {
  const size_t s = shard(loop);
  messages_in_.add(s);
  bytes_in_.add(s, bytes);
}

void Metrics::sent(const EventLoop& loop, uint64_t bytes) noexcept {
  const size_t s = shard(loop);
  messages_out_.add(s);
  bytes_out_.add(s, bytes);
}

}  // namespace ucp::ws
