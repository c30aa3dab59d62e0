#pragma once
// ReconnectingClient: a TCP client that stays connected. It connects, hands each connection to
// the caller, and when one ends or an attempt fails it tries again after a back-off: doubling
// delays with jitter, up to a cap, reset once a connection has proved healthy; a stop token
// ends it at once, waiting or connecting.
//
//   ucp::ReconnectOptions options;
//   options.stop = stop.token();                                      // e.g. the runtime's stop
//   ucp::ReconnectingClient feed(loop, "feed.example", 9000, options);
//   co_await feed.run([](ucp::TcpConnection& conn) -> ucp::Task<> {   // each connection in turn
//     ucp::BufferedReader reader(conn);
//     while (auto frame = co_await reader.read_frame(format)) handle(*frame);
//   });                                                               // returns once stopped
//
//   // Or one connection at a time, for a caller that decides itself:
//   while (auto conn = co_await feed.connect()) co_await session(**conn);
//
// The first attempt is made at once. After a failed attempt, or a connection that lasted less
// than healthy_after (a server that accepts and drops at once must not be hammered), the next
// waits the current delay: initial_delay, then multiplied by `multiplier` each time up to
// max_delay, each drawn at random from [delay x (1 - jitter), delay] so that clients that lost
// one server together do not return together. A connection that lasted healthy_after resets
// the delay, and the next attempt after it is made at once.
//
// Thread contract: the loop's thread only; one connect() or run() at a time.

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFunction.h"
#include "ucp/coro/StopToken.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/net/TcpClient.h"
#include "ucp/net/TcpConnection.h"

namespace ucp {

struct ReconnectOptions {
  std::chrono::milliseconds initial_delay{100};  // the first wait
  std::chrono::milliseconds max_delay{30000};    // the cap on each wait
  double multiplier = 2.0;                       // each wait after a failure: this many times more
  double jitter = 0.5;                           // 0..1: how much of a wait may be cut at random
  std::chrono::milliseconds healthy_after{10000};  // a connection this old resets the back-off
  uint32_t max_attempts = 0;  // failed attempts in a row before connect() gives up; 0 = never
  StopToken stop;             // ends a wait or an attempt: operation_canceled
  ClientOptions client;       // each attempt's (connect_timeout_ms, read_timeout_ms...)
};

class ReconnectingClient {
 public:
  /// Called after each failed attempt with its error and the wait before the next (to log).
  using RetryHook = UniqueFunction<void(std::error_code, std::chrono::milliseconds)>;

  ReconnectingClient(EventLoop& loop, std::string host, uint16_t port,
                     ReconnectOptions options = {});

  /// The next connection: waits out the back-off if one is due, then attempts until one
  /// connects. Errors: operation_canceled once options.stop is requested; after max_attempts
  /// failed attempts in a row, the last one's error (connection_refused, timed_out...).
  Task<Result<ClientConnection>> connect();

  /// Runs `session` on each connection in turn, closing each once its session returns, until
  /// options.stop is requested (then the session's reads end with operation_canceled, and
  /// run() returns success) or max_attempts attempts in a row fail (that error).
  template <ConnectionHandler F>
  Task<Result<void>> run(F session) {
    for (;;) {
      auto conn = co_await connect();
      if (!conn) {
        if (options_.stop.stop_requested()) co_return Result<void>{};
        co_return Unexpected{conn.error()};
      }
      {
        TcpConnection& connection = **conn;
        StopCallback ending(options_.stop, [&connection]() noexcept { connection.stop_reading(); });
        co_await session(connection);
      }
      co_await conn->close();
    }
  }

  void on_retry(RetryHook hook) { on_retry_ = std::move(hook); }

  EventLoop& loop() const noexcept { return loop_; }
  /// Connections made so far.
  uint64_t connections() const noexcept { return connections_; }
  /// Attempts that failed so far (in all).
  uint64_t failures() const noexcept { return failures_; }
  /// The wait before the next attempt if it fails (before jitter).
  std::chrono::milliseconds delay() const noexcept { return delay_; }

 private:
  /// The wait to make now (jitter applied), and the delay grown for the next time.
  std::chrono::milliseconds next_wait();

  EventLoop& loop_;
  std::string host_;
  uint16_t port_;
  ReconnectOptions options_;
  RetryHook on_retry_;
  std::minstd_rand random_;
  std::chrono::milliseconds delay_;
  Clock::time_point connected_at_{};
  bool wait_first_ = false;  // the last connection ended early: back off before the next
  uint64_t connections_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace ucp
