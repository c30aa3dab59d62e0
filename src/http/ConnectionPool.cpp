#include "ucp/http/ConnectionPool.h"

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <optional>
#include <utility>

namespace ucp::http {

/// One watcher's state, in its frame (watcher()): while it watches, the session given to it
/// (owned until take() claims it or the watch ends) and its receive; while parked, nothing.
struct ConnectionPool::Idle {
  explicit Idle(ConnectionPool* owner) noexcept : pool(owner) {}
  Idle(const Idle&) = delete;
  Idle& operator=(const Idle&) = delete;

  /// The receive lives here rather than in a co_await of the watcher: try_take() releases it
  /// without resuming the watcher, which then waits, suspended where it was, for the receive of
  /// the next connection given to it.
  struct Receive {
    Receive(TcpConnection& connection, BufferLease& into) noexcept
        : awaiter(connection.receive_into(into)) {}
    TcpConnection::ReadAwaiter awaiter;
  };

  ConnectionPool* pool;  // null once the pool is gone or has let go of it
  std::string key;       // (its capacity stays from one connection to the next)
  std::unique_ptr<ClientSession> session;
  Clock::time_point due = Clock::time_point::max();  // closed then, unused (max: never)
  // The pool's idle list (linked) or its parked watchers (parked), never both.
  Idle* older = nullptr;
  Idle* newer = nullptr;
  bool linked = false;
  bool parked = false;
  std::coroutine_handle<> watcher;  // the frame this lives in, suspended
  // take(): who waits for the watch to end, and where the session goes if it is still clean.
  std::coroutine_handle<> taker;
  std::unique_ptr<ClientSession>* out = nullptr;
  BufferLease lease;
  // From give() until the watcher resumes, or try_take() releases it.
  std::optional<Receive> receive;

  /// Ends the receive (the watcher then resumes: with nothing received, the connection is
  /// clean). Straight through the awaiter rather than a stop token: no callback to register
  /// and unregister per connection given back.
  void stop() noexcept {
    if (receive) receive->awaiter.cancel();
  }

  ~Idle() {
    if (pool != nullptr) {
      pool->unlink(*this);
      pool->unpark(*this);
    }
  }
};

struct ConnectionPool::TakeAwaiter {
  Idle& idle;
  std::unique_ptr<ClientSession> result;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> caller) noexcept {
    idle.taker = caller;
    idle.out = &result;
    idle.stop();  // ends the watch's receive; the watch then resumes us
  }
  std::unique_ptr<ClientSession> await_resume() noexcept { return std::move(result); }
};

/// Where a watcher waits, parked or watching: only a receive resumes it (news, or a cancel).
struct ConnectionPool::Suspend {
  Idle& idle;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> self) noexcept { idle.watcher = self; }
  void await_resume() const noexcept {}
};

ConnectionPool::ExpiryTimer::ExpiryTimer(ConnectionPool& owner) noexcept
    : TimerNode([](TimerNode& node) noexcept { static_cast<ExpiryTimer&>(node).pool.expire(); }),
      pool(owner) {}

ConnectionPool::ConnectionPool(EventLoop& loop, PoolOptions options)
    : loop_(loop), options_(options) {}

void ConnectionPool::arm(Clock::time_point due) {
  if (due == Clock::time_point::max()) return;
  if (!expiry_.armed() || due < expiry_.due()) loop_.add_timer(expiry_, due);
}

void ConnectionPool::expire() noexcept {
  // (A timer callback: the stops below only schedule the watches, which close their
  // connections.)
  const Clock::time_point now = loop_.now();
  Clock::time_point next = Clock::time_point::max();
  for (Idle* i = oldest_; i != nullptr;) {
    Idle* newer = i->newer;
    if (i->due <= now) {
      unlink(*i);
      i->pool = nullptr;
      i->stop();
    } else {
      next = std::min(next, i->due);
    }
    i = newer;
  }
  if (next != Clock::time_point::max()) loop_.add_timer(expiry_, next);
}

ConnectionPool::~ConnectionPool() {
  clear();
  while (parked_ != nullptr) {
    Idle& idle = *parked_;
    unpark(idle);
    idle.pool = nullptr;
    idle.watcher.destroy();  // suspended without a connection: nothing to close
  }
}

void ConnectionPool::link(Idle& idle) noexcept {
  idle.older = newest_;
  idle.newer = nullptr;
  if (newest_ != nullptr) {
    newest_->newer = &idle;
  } else {
    oldest_ = &idle;
  }
  newest_ = &idle;
  idle.linked = true;
  ++idle_count_;
}

void ConnectionPool::unlink(Idle& idle) noexcept {
  if (!idle.linked) return;
  (idle.older != nullptr ? idle.older->newer : oldest_) = idle.newer;
  (idle.newer != nullptr ? idle.newer->older : newest_) = idle.older;
  idle.older = idle.newer = nullptr;
  idle.linked = false;
  --idle_count_;
}

void ConnectionPool::park(Idle& idle) noexcept {
  idle.older = nullptr;
  idle.newer = parked_;
  if (parked_ != nullptr) parked_->older = &idle;
  parked_ = &idle;
  idle.parked = true;
  ++parked_count_;
}

void ConnectionPool::unpark(Idle& idle) noexcept {
  if (!idle.parked) return;
  (idle.older != nullptr ? idle.older->newer : parked_) = idle.newer;
  if (idle.newer != nullptr) idle.newer->older = idle.older;
  idle.older = idle.newer = nullptr;
  idle.parked = false;
  --parked_count_;
}

bool ConnectionPool::keep_watcher(Idle& idle) noexcept {
  if (parked_count_ >= options_.max_idle) return false;
  park(idle);
  return true;
}

size_t ConnectionPool::idle(std::string_view key) const noexcept {
  size_t n = 0;
  for (const Idle* i = oldest_; i != nullptr; i = i->newer) n += i->key == key ? 1 : 0;
  return n;
}

void ConnectionPool::clear() noexcept {
  while (oldest_ != nullptr) {
    Idle& idle = *oldest_;
    unlink(idle);
    idle.pool = nullptr;
    idle.stop();  // the watch closes the connection
  }
}

void ConnectionPool::evict_for(std::string_view key) noexcept {
  // The oldest connection of the key when the key is at its bound, else the oldest of all.
  auto evict = [this](Idle& idle) {
    unlink(idle);
    idle.pool = nullptr;
    idle.stop();
  };
  // (Counting the key's connections walks them all: only when the pool holds that many.)
  if (idle_count_ >= options_.max_idle_per_key && idle(key) >= options_.max_idle_per_key) {
    for (Idle* i = oldest_; i != nullptr; i = i->newer) {
      if (i->key == key) {
        evict(*i);
        break;
      }
    }
  }
  if (idle_count_ >= options_.max_idle && oldest_ != nullptr) evict(*oldest_);
}

std::optional<std::unique_ptr<ClientSession>> ConnectionPool::try_take(
    std::string_view key) noexcept {
  Idle* found = nullptr;
  for (Idle* i = newest_; i != nullptr; i = i->older) {  // the warmest first
    if (i->key == key) {
      found = i;
      break;
    }
  }
  if (found == nullptr) return std::unique_ptr<ClientSession>();
  // The receive ends now, nothing having come: the connection is clean. Its watcher is not
  // resumed: parked, it waits on the next connection given back.
  if (!found->receive || !found->receive->awaiter.release()) return std::nullopt;
  found->receive.reset();
  unlink(*found);
  ++reused_;
  std::unique_ptr<ClientSession> session = std::move(found->session);
  if (!keep_watcher(*found)) {
    found->pool = nullptr;
    found->watcher.destroy();
  }
  return session;
}

Task<std::unique_ptr<ClientSession>> ConnectionPool::take(std::string_view key) {
  if (auto now = try_take(key)) co_return std::move(*now);
  for (;;) {
    Idle* found = nullptr;
    for (Idle* i = newest_; i != nullptr; i = i->older) {  // the warmest first
      if (i->key == key) {
        found = i;
        break;
      }
    }
    if (found == nullptr) co_return nullptr;
    unlink(*found);
    std::unique_ptr<ClientSession> session = co_await TakeAwaiter{*found, nullptr};
    if (session) {
      ++reused_;
      co_return session;
    }
    // The server closed it, or sent something, while it waited: the next one.
  }
}

void ConnectionPool::give(std::string_view key, std::unique_ptr<ClientSession> session) {
  if (!session || !session->reusable()) return;  // dropped: closed in the background
  if (options_.max_idle == 0 || options_.max_idle_per_key == 0) return;
  evict_for(key);
  if (parked_ == nullptr) loop_.spawn(watcher());  // runs until it waits, parked
  Idle& idle = *parked_;
  unpark(idle);
  idle.key.assign(key);
  idle.session = std::move(session);
  watch(idle);
}

void ConnectionPool::watch(Idle& idle) {
  idle.receive.emplace(idle.session->connection(), idle.lease);
  TcpConnection::ReadAwaiter& receive = idle.receive->awaiter;
  // The watcher, suspended already, is the receive's waiter.
  if (receive.await_ready() || !receive.await_suspend(idle.watcher)) {
    // News already (a close, a stray byte): the watcher closes it now, while the pool it counts
    // in is sure to be there (it may be gone by a later turn of the loop). Nothing of `idle` is
    // touched after: the watcher may end, and its frame go, before resume() returns.
    idle.watcher.resume();
    return;
  }
  link(idle);
  idle.due = Clock::time_point::max();
  if (options_.idle_timeout_ms != 0) {
    idle.due = loop_.now() + std::chrono::milliseconds(options_.idle_timeout_ms);
    arm(idle.due);
  }
}

Spawned ConnectionPool::watcher() {
  EventLoop& loop = loop_;  // the pool may be gone when the receive ends
  Idle idle(this);
  park(idle);
  for (;;) {
    co_await Suspend{idle};
    // A receive that give() started has ended: news, a stop, or take()'s cancel.
    auto received = idle.receive->awaiter.await_resume();
    idle.receive.reset();
    idle.lease.reset();
    // Only a receive that take() cancelled before anything came leaves the connection clean.
    const bool clean = !received && received.error() == std::errc::operation_canceled;
    if (idle.pool != nullptr) {
      idle.pool->unlink(idle);
      // (A close, a reset or a stray byte: the server's doing; the pool's stop is not.)
      if (!clean && (received.has_value() || received.error() != std::errc::operation_canceled)) {
        ++idle.pool->closed_by_server_;
      }
    }
    if (idle.taker) {
      if (clean) *idle.out = std::move(idle.session);
      idle.out = nullptr;
      loop.schedule(std::exchange(idle.taker, {}));
    }
    if (!idle.session && idle.pool != nullptr && idle.pool->keep_watcher(idle)) continue;
    break;
  }
  idle.pool = nullptr;  // it ends: the pool forgets it
  if (idle.session) co_await idle.session->close();
}

}  // namespace ucp::http
