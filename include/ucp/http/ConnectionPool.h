#pragma once
// ConnectionPool: idle keep-alive connections of one loop, by key (an origin such as
// "http://10.0.0.7:8080", or one server of a gateway's upstream group), for the next request
// to the same place.
//
//   ConnectionPool pool(loop, {.max_idle = 32, .max_idle_per_key = 32, .idle_timeout_ms = 60000});
//   std::unique_ptr<ClientSession> session = co_await pool.take("10.0.0.7:8080");
//   if (!session) session = connect(...);
//   ... one request and its whole response ...
//   if (session->reusable()) pool.give("10.0.0.7:8080", std::move(session));
//   else co_await session->close();
//
// While a connection waits in the pool a receive stays posted on it, so that what the server
// does meanwhile is seen at once: a close (the server's keep-alive timeout ran out), a reset,
// or a byte it had no business sending, and the connection is closed and forgotten then; so is
// one idle for idle_timeout_ms (one timer for the whole pool, armed for the earliest expiry,
// rather than one per connection given back). take() cancels that receive and hands the connection
// over only if nothing came; try_take() does the same without a wait when the receive ends at
// once (a plain connection's multishot receive with nothing received). A server may still close a
// connection just as it is taken (the request then meets the close): callers retry a request that
// got no byte of answer on a reused connection when that is safe (no body, or one they can send
// again).
//
// The receive's waiter is a watcher coroutine that outlives the connections it watches: a
// connection taken without a wait leaves its watcher suspended and parked, and the next one
// given back is watched by it (no coroutine frame made, started or resumed per connection given
// back and taken; at most max_idle watchers stay parked).
//
// Bounds: at most max_idle_per_key per key and max_idle in all; beyond them give() closes the
// oldest idle connection of the pool to make room (the least likely to be used again).
//
// Thread contract: the loop's thread only. Destroying the pool closes every idle connection
// (in the background, as ClientConnection does); the loop must outlive it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ucp/coro/SpawnGroup.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/http/ClientSession.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/Timer.h"

namespace ucp::http {

struct PoolOptions {
  uint32_t max_idle = 64;            // idle connections in all
  uint32_t max_idle_per_key = 32;    // idle connections to one key
  uint32_t idle_timeout_ms = 60000;  // an idle connection unused this long is closed (0 = never)
};

class ConnectionPool {
 public:
  ConnectionPool(EventLoop& loop, PoolOptions options = {});
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool();

  /// The most recently returned idle connection for `key` that is still usable, or null.
  Task<std::unique_ptr<ClientSession>> take(std::string_view key);
  /// take() without a wait when none is needed (the common case: a connection whose idle
  /// receive ends at once, nothing having come): the connection, or null when there is none
  /// for `key`; empty when the answer must be awaited (a TLS connection's receive, a
  /// single-shot one, or news from the server to look at first): co_await take() then.
  std::optional<std::unique_ptr<ClientSession>> try_take(std::string_view key) noexcept;
  /// Keeps `session`, which must be reusable(), for `key` (closes it when the pool is full of
  /// newer ones, or its options allow none).
  void give(std::string_view key, std::unique_ptr<ClientSession> session);
  /// Closes every idle connection (a gateway reconfigured, a program shutting down).
  void clear() noexcept;

  size_t idle() const noexcept { return idle_count_; }
  size_t idle(std::string_view key) const noexcept;
  /// Connections handed out again by take() (cumulative).
  uint64_t reused() const noexcept { return reused_; }
  /// Idle connections closed because the server closed or reset them, or sent something.
  uint64_t closed_by_server() const noexcept { return closed_by_server_; }
  const PoolOptions& options() const noexcept { return options_; }
  void set_options(const PoolOptions& options) noexcept { options_ = options; }

 private:
  struct Idle;
  struct TakeAwaiter;
  struct Suspend;
  /// Spawned (not a Task): its frame is its own wrapper in the loop's group. Parks itself, then
  /// watches the connections give() hands it, one after the other.
  Spawned watcher();
  /// Starts `idle`'s receive on its session (its watcher waits for it), or schedules the watcher
  /// when there is news already.
  void watch(Idle& idle);
  void link(Idle& idle) noexcept;
  void unlink(Idle& idle) noexcept;
  /// A watcher without a connection, kept for the next give().
  void park(Idle& idle) noexcept;
  void unpark(Idle& idle) noexcept;
  /// Parks a watcher whose connection was taken, or ends it when max_idle are parked already.
  bool keep_watcher(Idle& idle) noexcept;
  void evict_for(std::string_view key) noexcept;
  /// Closes the idle connections whose time is up and arms the timer for the next one.
  void expire() noexcept;
  void arm(Clock::time_point due);

  struct ExpiryTimer : TimerNode {
    explicit ExpiryTimer(ConnectionPool& owner) noexcept;
    ConnectionPool& pool;
  };

  EventLoop& loop_;
  PoolOptions options_;
  Idle* oldest_ = nullptr;  // a list from oldest to newest
  Idle* newest_ = nullptr;
  Idle* parked_ = nullptr;  // watchers without a connection
  size_t parked_count_ = 0;
  size_t idle_count_ = 0;
  uint64_t reused_ = 0;
  uint64_t closed_by_server_ = 0;
  ExpiryTimer expiry_{*this};  // last: destroyed (and so taken off the loop's timers) first
};

}  // namespace ucp::http
