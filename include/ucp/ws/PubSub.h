#pragma once
// PubSub: WebSocket publish/subscribe across loops. Connections subscribe to topics on their
// own worker loop; any thread publishes to a topic, and every subscriber gets the message, on
// whichever loop it lives, without the publisher knowing the loops or the connections:
//
//   ucp::ws::PubSub hub;                                       // outlives the server
//   server.router().get("/chat/{room}", ucp::ws::upgrade({}, [&](ucp::ws::WebSocket& ws)
//                                                            -> ucp::Task<> {
//     const std::string room(...);
//     auto joined = hub.subscribe(ws, room);                   // until it goes out of scope
//     while (auto message = co_await ws.receive()) hub.publish(room, message->text());
//   }));
//   hub.publish("prices", R"({"EURUSD":1.0841})");           // from any thread
//
// - Lifetimes are the hub's business. A Subscription is an RAII handle: the handler holds it,
//   and when the handler returns (or the connection closes, or unsubscribe()) the subscriber
//   simply stops receiving. A message in flight keeps its bytes until every connection has
//   sent them; the publisher's buffer may be reused as soon as publish() returns.
// - Order: a subscriber gets the messages of one publishing thread in the order published.
// - Fan-out: publish() copies the message once, then posts it once to each loop that has
//   subscribers; there each subscriber sends it as a WebSocket frame (an unmasked server frame,
//   copied into the connection's output queue, or compressed for a connection that negotiated
//   permessage-deflate).
// - Slow consumers: a connection whose peer does not read fills its output queue
//   (server.max_output_bytes), then its subscriber queue here (max_queued_messages,
//   max_queued_bytes). Past that, options.slow_consumer decides: kClose (the default) closes it
//   with options.close_code (1013 Try Again Later, or 1008 Policy Violation), kDrop drops the
//   messages it has no room for and counts them. Either way its memory stays bounded, and the
//   other subscribers do not wait for it.
// - A loop that falls behind its publishers (max_backlog messages posted to it and not yet
//   delivered) gets no more until it catches up: publish() returns false and counts them.
//
// A subscribed connection must keep a receive() pending (the usual read loop), as every
// WebSocket handler does: a slow consumer's close then completes through it.
//
// Thread contract: subscribe(), Subscription and unsubscribe() on the connection's loop
// thread; publish() and stats() from any thread. The hub must outlive the loops of its
// subscribers (create it before the server, destroy it after).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/io/EventLoop.h"
#include "ucp/ws/Protocol.h"
#include "ucp/ws/WebSocket.h"

namespace ucp::ws {

/// What happens to a subscriber whose queue is full.
enum class SlowConsumer : uint8_t {
  kClose,  // close its connection with PubSubOptions::close_code
  kDrop,   // drop the messages it has no room for (counted in PubSubStats::dropped)
};

struct PubSubOptions {
  /// Messages one subscriber may have waiting behind its connection's full output queue.
  uint32_t max_queued_messages = 1024;
  /// ... and their bytes, in all.
  uint64_t max_queued_bytes = 4 * 1024 * 1024;
  SlowConsumer slow_consumer = SlowConsumer::kClose;
  /// kClose: close_code::kTryAgainLater (1013) or kPolicyViolation (1008), or 3000-4999.
  uint16_t close_code = close_code::kTryAgainLater;
  /// Messages posted to one loop and not yet delivered there, beyond which that loop gets no
  /// more until it catches up.
  uint32_t max_backlog = 65536;
};

/// Counters since the hub was made (each a sum over the loops, read without stopping them).
struct PubSubStats {
  uint64_t published = 0;    // publish() calls that reached at least one loop
  uint64_t delivered = 0;    // messages handed to subscribers' connections
  uint64_t dropped = 0;      // messages a subscriber had no room for (kDrop)
  uint64_t closed = 0;       // subscribers closed as slow consumers (kClose)
  uint64_t backlogged = 0;   // messages a loop that fell behind did not get
  uint64_t subscribers = 0;  // connections subscribed to at least one topic now
  uint64_t queued = 0;       // messages waiting in subscribers' queues now
};

class PubSub;

namespace detail {
struct PubSubShard;
struct Subscriber;
struct Membership;
}  // namespace detail

/// A connection's subscription to one topic, until destroyed or unsubscribe() (move-only; on
/// the connection's loop thread).
class [[nodiscard]] Subscription {
 public:
  Subscription() noexcept = default;
  Subscription(Subscription&& other) noexcept;
  Subscription& operator=(Subscription&& other) noexcept;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() { unsubscribe(); }

  /// Leaves the topic; messages already queued for the connection are still sent.
  void unsubscribe() noexcept;
  bool active() const noexcept { return membership_ != nullptr; }

 private:
  friend class PubSub;
  explicit Subscription(detail::Membership* membership) noexcept : membership_(membership) {}
  detail::Membership* membership_ = nullptr;
};

class PubSub {
 public:
  explicit PubSub(PubSubOptions options = {});
  PubSub(const PubSub&) = delete;
  PubSub& operator=(const PubSub&) = delete;
  ~PubSub();

  /// Subscribes `ws` to `topic` (the connection's loop thread). Subscribing a connection to a
  /// topic twice gives two subscriptions but one copy of each message.
  Subscription subscribe(WebSocket& ws, std::string_view topic);

  /// Any thread. Sends `data` as one message of `kind` to every subscriber of `topic`. False
  /// when a loop with subscribers was too far behind to take it (see max_backlog).
  bool publish(std::string_view topic, MessageKind kind, std::span<const std::byte> data);
  bool publish(std::string_view topic, std::string_view text) {
    return publish(topic, MessageKind::kText, std::as_bytes(std::span(text.data(), text.size())));
  }

  /// Any thread.
  PubSubStats stats() const noexcept;
  const PubSubOptions& options() const noexcept { return options_; }

 private:
  detail::PubSubShard& shard_of(EventLoop& loop);

  PubSubOptions options_;
  mutable std::mutex shards_mutex_;  // the list only: shards are added, never removed
  std::vector<std::unique_ptr<detail::PubSubShard>> shards_;
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> backlogged_{0};
};

}  // namespace ucp::ws
