#include "ucp/ws/PubSub.h"

#include <algorithm>
#include <array>
#include <coroutine>
#include <unordered_map>
#include <utility>

#include "ucp/coro/Task.h"

namespace ucp::ws {
namespace detail {

// One publish: its bytes, shared by every loop that delivers it (the only atomic count).
struct Published {
  std::string topic;
  MessageKind kind;
  std::unique_ptr<std::byte[]> bytes;
  size_t size;
  std::span<const std::byte> data() const noexcept { return {bytes.get(), size}; }
};

// One publish on one loop, shared by that loop's subscribers without atomics.
struct Delivery {
  std::shared_ptr<const Published> message;
  uint32_t refs = 0;
};

void release(Delivery* delivery) noexcept {
  if (--delivery->refs == 0) delete delivery;
}

// A subscriber's waiting messages, oldest first: a ring that allocates nothing until the first
// message waits (std::deque allocates on construction: every idle subscriber would pay it).
class DeliveryQueue {
 public:
  bool empty() const noexcept { return count_ == 0; }
  size_t size() const noexcept { return count_; }
  Delivery* front() const noexcept { return ring_[head_]; }
  void push_back(Delivery* delivery) {
    if (count_ == ring_.size()) grow();
    ring_[(head_ + count_) % ring_.size()] = delivery;
    ++count_;
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  /// Releases every waiting message; the ring's memory goes too.
  void clear() noexcept {
    while (!empty()) {
      release(front());
      pop_front();
    }
    std::vector<Delivery*>().swap(ring_);
    head_ = 0;
  }

 private:
  void grow() {
    std::vector<Delivery*> bigger(std::max<size_t>(4, ring_.size() * 2));
    for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_.swap(bigger);
    head_ = 0;
  }
  std::vector<Delivery*> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
};

struct Topic {
  std::vector<Membership*> members;  // each knows its index: leaving is a swap and a pop
};

// A connection subscribed to one or more topics of one loop: its queue and the coroutine that
// sends it (the drainer). Freed by the last of its holders: the drainer and the memberships.
struct Subscriber {
  Subscriber(PubSubShard& owner, WebSocket& socket) noexcept : shard(owner), ws(socket) {}

  PubSubShard& shard;
  WebSocket& ws;
  uint32_t refs = 0;
  uint32_t memberships = 0;
  DeliveryQueue queue;
  uint64_t queued_bytes = 0;
  std::coroutine_handle<> parked;  // the drainer, waiting for work
  uint64_t last_delivery = 0;      // the shard's sequence number of the last one queued
  bool gone = false;               // no membership left: the drainer ends
  bool stopped = false;            // its connection ended or was closed: nothing more to send
  bool closing = false;            // a slow consumer, being closed: nothing more to send
};

struct Membership {
  Subscriber* subscriber;
  Topic* topic;
  std::string_view name;  // the topic map's key
  size_t index;
};

struct PubSubShard {
  PubSubShard(PubSub& h, EventLoop& l) noexcept : hub(h), loop(l) {}

  void deliver(const std::shared_ptr<const Published>& message);
  void hold(Subscriber& s) noexcept { ++s.refs; }
  void release(Subscriber& s) noexcept;
  void wake(Subscriber& s) noexcept {
    if (s.parked) loop.schedule(std::exchange(s.parked, {}));
  }
  void leave(Membership* membership) noexcept;
  void drop_queue(Subscriber& s) noexcept;
  /// Counters are written by this loop only: a relaxed load and store, no locked instruction.
  static void count(std::atomic<uint64_t>& counter, uint64_t n = 1) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  static void discount(std::atomic<uint64_t>& counter, uint64_t n = 1) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }

  PubSub& hub;
  EventLoop& loop;
  std::unordered_map<std::string, Topic> topics;
  std::unordered_map<const WebSocket*, Subscriber*> by_socket;
  uint64_t deliveries = 0;           // sequence numbers of this loop's deliveries
  std::atomic<uint32_t> backlog{0};  // posted by publishers, not yet delivered
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> closed{0};
  std::atomic<uint64_t> subscribers{0};
  std::atomic<uint64_t> queued{0};
};

namespace {

// Where the drainer waits for its queue to fill (or for its subscriber to go).
struct Park {
  Subscriber& s;
  bool await_ready() const noexcept { return s.gone || (!s.queue.empty() && sending()); }
  bool sending() const noexcept { return !s.stopped && !s.closing; }
  void await_suspend(std::coroutine_handle<> self) noexcept { s.parked = self; }
  void await_resume() const noexcept {}
};

// Gives the drainer's hold on its subscriber back however the frame ends (a loop that stops
// destroys it where it waits).
struct Hold {
  PubSubShard& shard;
  Subscriber& s;
  ~Hold() {
    s.parked = {};
    shard.drop_queue(s);
    shard.release(s);
  }
};

Task<> drain(PubSubShard& shard, Subscriber& s) {
  Hold hold{shard, s};
  for (;;) {
    co_await Park{s};
    if (s.gone) co_return;
    while (!s.queue.empty() && !s.stopped && !s.closing) {
      Delivery* next = s.queue.front();
      auto sent = co_await s.ws.send(next->message->kind, next->message->data());
      if (s.gone) co_return;  // the connection may be gone too: do not touch it
      s.queue.pop_front();
      s.queued_bytes -= next->message->size;
      PubSubShard::discount(shard.queued);
      release(next);
      if (!sent) {
        s.stopped = true;  // closing or closed: what is queued will never go
        break;
      }
      PubSubShard::count(shard.delivered);
    }
    if (s.stopped || s.closing) shard.drop_queue(s);
  }
}

// Closes a slow consumer's connection. Its close frame queues behind what the connection has
// queued already (the drainer may be waiting in a send that only the peer's reading, or the
// connection's end, completes): a peer that reads again sees it; one that never does is dropped
// when close_timeout_ms has passed without its answer. A coroutine of its own, holding the
// subscriber, so that the drainer's send need not end first.
Task<> close_slow(PubSubShard& shard, Subscriber& s) {
  struct Release {
    PubSubShard& shard;
    Subscriber& s;
    ~Release() { shard.release(s); }
  } release{shard, s};
  // Gone: its handler returned, and the connection closes anyway (it may be gone itself).
  if (s.gone || !s.ws.is_open()) co_return;
  PubSubShard::count(shard.closed);
  (void)co_await s.ws.close(shard.hub.options().close_code, "slow consumer");
}

}  // namespace

void PubSubShard::release(Subscriber& s) noexcept {
  if (--s.refs == 0) delete &s;
}

void PubSubShard::drop_queue(Subscriber& s) noexcept {
  discount(queued, s.queue.size());
  s.queue.clear();
  s.queued_bytes = 0;
}

void PubSubShard::deliver(const std::shared_ptr<const Published>& message) {
  backlog.fetch_sub(1, std::memory_order_relaxed);
  auto topic = topics.find(message->topic);
  if (topic == topics.end()) return;
  const PubSubOptions& options = hub.options();
  auto* delivery = new Delivery{message, 1};  // this loop's hold until the walk is done
  const uint64_t sequence = ++deliveries;
  for (Membership* member : topic->second.members) {
    Subscriber& s = *member->subscriber;
    // One copy for a connection subscribed twice; none for one that is closing.
    if (s.last_delivery == sequence || s.stopped || s.closing) continue;
    s.last_delivery = sequence;
    if (s.queue.size() >= options.max_queued_messages ||
        s.queued_bytes + message->size > options.max_queued_bytes) {
      if (options.slow_consumer == SlowConsumer::kDrop) {
        count(dropped);
        continue;
      }
      s.closing = true;
      wake(s);  // a parked drainer drops the queue at once; a sending one after its send
      hold(s);
      loop.spawn(close_slow(*this, s));
      continue;
    }
    ++delivery->refs;
    s.queue.push_back(delivery);
    s.queued_bytes += message->size;
    count(queued);
    wake(s);
  }
  detail::release(delivery);
}

void PubSubShard::leave(Membership* membership) noexcept {
  Subscriber& s = *membership->subscriber;
  auto& members = membership->topic->members;
  Membership* last = members.back();
  members[membership->index] = last;
  last->index = membership->index;
  members.pop_back();
  if (members.empty()) topics.erase(std::string(membership->name));
  delete membership;
  if (--s.memberships == 0) {
    s.gone = true;
    by_socket.erase(&s.ws);
    discount(subscribers);
    wake(s);
  }
  release(s);
}

}  // namespace detail

// ---- Subscription ----

Subscription::Subscription(Subscription&& other) noexcept
    : membership_(std::exchange(other.membership_, nullptr)) {}

Subscription& Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    unsubscribe();
    membership_ = std::exchange(other.membership_, nullptr);
  }
  return *this;
}

void Subscription::unsubscribe() noexcept {
  if (membership_ == nullptr) return;
  detail::Membership* membership = std::exchange(membership_, nullptr);
  membership->subscriber->shard.leave(membership);
}

// ---- PubSub ----

PubSub::PubSub(PubSubOptions options) : options_(options) {}

PubSub::~PubSub() = default;

detail::PubSubShard& PubSub::shard_of(EventLoop& loop) {
  std::lock_guard lock(shards_mutex_);
  for (const auto& shard : shards_) {
    if (&shard->loop == &loop) return *shard;
  }
  shards_.push_back(std::make_unique<detail::PubSubShard>(*this, loop));
  return *shards_.back();
}

Subscription PubSub::subscribe(WebSocket& ws, std::string_view topic) {
  detail::PubSubShard& shard = shard_of(ws.loop());
  detail::Subscriber*& slot = shard.by_socket[&ws];
  if (slot == nullptr) {
    slot = new detail::Subscriber(shard, ws);
    shard.hold(*slot);  // the drainer's
    detail::PubSubShard::count(shard.subscribers);
    shard.loop.spawn(detail::drain(shard, *slot));
  }
  detail::Subscriber& s = *slot;
  auto [entry, added] = shard.topics.try_emplace(std::string(topic));
  auto* membership =
      new detail::Membership{&s, &entry->second, entry->first, entry->second.members.size()};
  entry->second.members.push_back(membership);
  ++s.memberships;
  shard.hold(s);
  return Subscription(membership);
}

// The lock covers only the choice of loops (the list may grow meanwhile); the posts, each a
// queue push and perhaps an eventfd write that wakes a loop, come after it, so that publishers
// on many loops do not queue behind one another's system calls (docs/scaling.md). Shards are
// never removed, so the pointers stay valid; each publishing thread's posts still reach every
// loop in the order it published.
bool PubSub::publish(std::string_view topic, MessageKind kind, std::span<const std::byte> data) {
  constexpr size_t kInlineTargets = 64;
  std::array<detail::PubSubShard*, kInlineTargets> inline_targets;
  std::vector<detail::PubSubShard*> more_targets;  // past kInlineTargets loops only
  size_t count = 0;
  bool all = true;
  {
    std::lock_guard lock(shards_mutex_);
    for (const auto& shard : shards_) {
      if (shard->subscribers.load(std::memory_order_relaxed) == 0) continue;
      if (shard->backlog.fetch_add(1, std::memory_order_relaxed) >= options_.max_backlog) {
        shard->backlog.fetch_sub(1, std::memory_order_relaxed);
        backlogged_.fetch_add(1, std::memory_order_relaxed);
        all = false;
        continue;
      }
      if (count < kInlineTargets) {
        inline_targets[count] = shard.get();
      } else {
        more_targets.push_back(shard.get());
      }
      ++count;
    }
  }
  if (count == 0) return all;
  auto target_at = [&](size_t i) {
    return i < kInlineTargets ? inline_targets[i] : more_targets[i - kInlineTargets];
  };
  size_t posted = 0;
  try {
    auto bytes = std::make_unique<std::byte[]>(data.size());  // copied once, for every loop
    if (!data.empty()) std::copy(data.begin(), data.end(), bytes.get());
    const auto message = std::make_shared<const detail::Published>(
        detail::Published{std::string(topic), kind, std::move(bytes), data.size()});
    for (; posted < count; ++posted) {
      detail::PubSubShard* target = target_at(posted);
      target->loop.post([target, message] { target->deliver(message); });
    }
  } catch (...) {  // out of memory: the loops not posted to do not wait for this message
    for (size_t i = posted; i < count; ++i) {
      target_at(i)->backlog.fetch_sub(1, std::memory_order_relaxed);
    }
    throw;
  }
  published_.fetch_add(1, std::memory_order_relaxed);
  return all;
}

PubSubStats PubSub::stats() const noexcept {
  PubSubStats stats;
  stats.published = published_.load(std::memory_order_relaxed);
  stats.backlogged = backlogged_.load(std::memory_order_relaxed);
  std::lock_guard lock(shards_mutex_);
  for (const auto& shard : shards_) {
    stats.delivered += shard->delivered.load(std::memory_order_relaxed);
    stats.dropped += shard->dropped.load(std::memory_order_relaxed);
    stats.closed += shard->closed.load(std::memory_order_relaxed);
    stats.subscribers += shard->subscribers.load(std::memory_order_relaxed);
    stats.queued += shard->queued.load(std::memory_order_relaxed);
  }
  return stats;
}

}  // namespace ucp::ws
