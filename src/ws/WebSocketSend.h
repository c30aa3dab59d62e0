#pragma once
// What the parts of WebSocket that write frames share (WebSocketWrite.cpp, WebSocketControl.cpp,
// and WebSocketRead.cpp, which waits for the last writer): whose turn it is to write a frame in
// pieces, the count of coroutines writing, and the masking keys. Private to src/ws.
//
// WebSocket is one class in four files, one per operation:
//   WebSocket.cpp        construction, the end (closing state, lingering read)
//   WebSocketRead.cpp    receive(): the reading side run(), its state machine advance(), and
//                        the timers that wake it (ping interval, ping and close timeouts)
//   WebSocketWrite.cpp   send(): the fast path in place, the slow path as a coroutine
//   WebSocketControl.cpp ping(), close() and the control frames the reading side answers with

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include <sys/random.h>

#include "ucp/ws/WebSocket.h"

namespace ucp::ws {
namespace detail {

/// Payloads up to this size are copied into the output queue with their header (no wait);
/// larger ones are sent from the caller's memory.
constexpr size_t kCopyLimit = 1024;

constexpr uint8_t opcode_of(MessageKind kind) noexcept {
  return kind == MessageKind::kText ? 0x1 : 0x2;
}

inline std::span<const std::byte> bytes(const std::byte* data, size_t size) noexcept {
  return {data, size};
}

/// Masking keys from getrandom(2), 64 at a time: RFC 6455 §10.3 asks for a strong source.
inline void random_mask(std::byte* key) noexcept {
  thread_local std::byte pool[256];
  thread_local size_t used = sizeof pool;
  if (used + 4 > sizeof pool) {
    size_t got = 0;
    while (got < sizeof pool) {
      const ssize_t n = ::getrandom(pool + got, sizeof pool - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    for (; got < sizeof pool; ++got) pool[got] = static_cast<std::byte>(got * 131 + 7);
    used = 0;
  }
  std::memcpy(key, pool + used, 4);
  used += 4;
}

}  // namespace detail

// ---- turns: one frame at a time in the output queue ----

/// Waits for the turn to write a frame in pieces (FIFO); the turn is handed on by unlock().
class WebSocket::FrameLock {
 public:
  explicit FrameLock(WebSocket& ws) noexcept : ws_(ws) {}
  bool await_ready() noexcept {
    if (ws_.sending_) return false;
    ws_.sending_ = true;
    return true;
  }
  void await_suspend(std::coroutine_handle<> waiter) noexcept {
    // The waiters form a ring: the WebSocket points to the last, the last to the first.
    waiter_ = waiter;
    auto* last = static_cast<FrameLock*>(ws_.lock_tail_);
    if (last != nullptr) {
      next_ = last->next_;
      last->next_ = this;
    } else {
      next_ = this;
    }
    ws_.lock_tail_ = this;
  }
  void await_resume() const noexcept {}

  /// Hands the turn on when it goes out of scope: the frame is written, or failed.
  struct Turn {
    WebSocket& ws;
    ~Turn() { unlock(ws); }
  };

  /// Passes the turn to the next waiter, or frees it.
  static void unlock(WebSocket& ws) noexcept {
    auto* last = static_cast<FrameLock*>(ws.lock_tail_);
    if (last == nullptr) {
      ws.sending_ = false;
      return;
    }
    FrameLock* next = last->next_;
    if (next == last) {
      ws.lock_tail_ = nullptr;
    } else {
      last->next_ = next->next_;
    }
    ws.tcp_.loop().schedule(next->waiter_);  // sending_ stays set: the turn is theirs
  }

 private:
  WebSocket& ws_;
  FrameLock* next_ = nullptr;
  std::coroutine_handle<> waiter_;
};

/// Counts a coroutine writing a frame: a server's WebSocket lives until the last is out, so a
/// coroutine of another connection (a chat room's broadcast) may be suspended in send() while
/// this connection ends.
class WebSocket::Sender {
 public:
  explicit Sender(WebSocket& ws) noexcept : ws_(ws) { ++ws_.senders_; }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  ~Sender() {
    if (--ws_.senders_ == 0 && ws_.senders_done_) {
      ws_.tcp_.loop().schedule(std::exchange(ws_.senders_done_, {}));
    }
  }

 private:
  WebSocket& ws_;
};

/// Where run() waits for the last Sender before the WebSocket goes.
class WebSocket::SendersDone {
 public:
  explicit SendersDone(WebSocket& ws) noexcept : ws_(ws) {}
  bool await_ready() const noexcept { return ws_.senders_ == 0; }
  void await_suspend(std::coroutine_handle<> self) noexcept { ws_.senders_done_ = self; }
  void await_resume() const noexcept {}

 private:
  WebSocket& ws_;
};

}  // namespace ucp::ws
