#pragma once
// LoopbackClient: small blocking-style socket helpers for tests and bin/test_client.
//
// Every socket is non-blocking and every wait goes through poll(2) with a deadline, so no
// helper can hang a test: each returns std::errc::timed_out instead. Sends use MSG_NOSIGNAL,
// so a peer's reset surfaces as std::errc::broken_pipe or connection_reset, never SIGPIPE.
//
// Error values (Result<T>::error()):
//   timed_out           the deadline passed first
//   connection_aborted  orderly EOF before the expected byte count
//   connection_reset    the peer reset the connection (RST)
//   anything else       the errno of the failing call
//
// Header-only; no UCP library needed (ucp_base for Result and UniqueFd).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

// Integration tests link no UCP library, so include/ may be missing from their include path.
#if __has_include("ucp/base/Result.h")
#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"
#else
#include "../../include/ucp/base/Result.h"
#include "../../include/ucp/base/UniqueFd.h"
#endif

namespace ucp::test {

using Clock = std::chrono::steady_clock;

/// A point in time after which a helper gives up.
class Deadline {
 public:
  explicit Deadline(int64_t timeout_ms)
      : end_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  /// Milliseconds left for poll(2): 0 when expired, capped so that it fits an int.
  int remaining_ms() const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 1'000'000));
  }
  bool expired() const { return Clock::now() >= end_; }

 private:
  Clock::time_point end_;
};

inline std::error_code last_error() { return error_from_errno(errno); }

/// Waits for `events` on `fd`. Ok when any requested event (or an error/hangup) is ready.
inline Result<void> wait_for(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, deadline.remaining_ms());
    if (n > 0) return {};
    if (n == 0) return Unexpected{std::errc::timed_out};
    if (errno != EINTR) return Unexpected{last_error()};
  }
}

/// Connects to host:port over TCP; the returned socket is non-blocking.
/// `receive_buffer` > 0 sets SO_RCVBUF before the handshake (see set_receive_buffer).
inline Result<UniqueFd> connect_tcp(const std::string& host, uint16_t port,
                                    int64_t timeout_ms = 5000, int receive_buffer = 0) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Unexpected{std::errc::invalid_argument};
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Unexpected{last_error()};
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (receive_buffer > 0) {
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS) return Unexpected{last_error()};
  const Deadline deadline(timeout_ms);
  if (auto ready = wait_for(fd.get(), POLLOUT, deadline); !ready) return Unexpected{ready.error()};
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
    return Unexpected{last_error()};
  if (err != 0) return Unexpected{error_from_errno(err)};
  return fd;
}

inline Result<UniqueFd> connect_loopback(uint16_t port, int64_t timeout_ms = 5000,
                                         int receive_buffer = 0) {
  return connect_tcp("127.0.0.1", port, timeout_ms, receive_buffer);
}

/// Waits until connects to loopback `port` are refused; false if one still got through at the
/// deadline. A server killed with io_uring requests in flight on its listening socket (an
/// accept) is reaped before the kernel tears its ring down, in the background: until then
/// (tens of milliseconds on a busy machine) the socket still listens, and a connect completes,
/// then is reset when the socket closes.
inline bool wait_until_refused(uint16_t port, int64_t timeout_ms = 5000) {
  const Deadline deadline(timeout_ms);
  for (;;) {
    auto fd = connect_loopback(port, std::max(1, deadline.remaining_ms()));
    if (!fd && fd.error() == std::errc::connection_refused) return true;
    if (deadline.expired()) return false;
    ::poll(nullptr, 0, 1);
  }
}

/// Sends every byte of `data` before the deadline.
inline Result<void> send_all(int fd, std::span<const char> data, int64_t timeout_ms = 10000) {
  const Deadline deadline(timeout_ms);
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto ready = wait_for(fd, POLLOUT, deadline); !ready) return ready;
      continue;
    }
    return Unexpected{last_error()};
  }
  return {};
}

/// send_all for text (a separate name: a string converts to both span and string_view).
inline Result<void> send_text(int fd, std::string_view data, int64_t timeout_ms = 10000) {
  return send_all(fd, std::span<const char>(data.data(), data.size()), timeout_ms);
}

/// Receives up to `buffer.size()` bytes, waiting at most `timeout_ms` for the first one.
/// Returns 0 on orderly EOF.
inline Result<size_t> recv_some(int fd, std::span<char> buffer, int64_t timeout_ms = 10000) {
  const Deadline deadline(timeout_ms);
  for (;;) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Unexpected{last_error()};
    if (auto ready = wait_for(fd, POLLIN, deadline); !ready) return Unexpected{ready.error()};
  }
}

/// Receives exactly `buffer.size()` bytes before the deadline.
inline Result<void> recv_exact(int fd, std::span<char> buffer, int64_t timeout_ms = 10000) {
  const Deadline deadline(timeout_ms);
  size_t got = 0;
  while (got < buffer.size()) {
    auto n = recv_some(fd, buffer.subspan(got), deadline.remaining_ms());
    if (!n) return Unexpected{n.error()};
    if (*n == 0) return Unexpected{std::errc::connection_aborted};
    got += *n;
  }
  return {};
}

/// Reads and discards until the peer closes (EOF or RST). Returns the bytes discarded;
/// timed_out when the connection is still open at the deadline.
inline Result<size_t> drain_until_closed(int fd, int64_t timeout_ms) {
  const Deadline deadline(timeout_ms);
  char sink[16384];
  size_t total = 0;
  for (;;) {
    auto n = recv_some(fd, sink, deadline.remaining_ms());
    if (!n) {
      if (n.error() == std::errc::connection_reset) return total;
      return Unexpected{n.error()};
    }
    if (*n == 0) return total;
    total += *n;
  }
}

/// Makes close(2) send RST instead of FIN and drop unsent data (SO_LINGER {1, 0}).
inline void set_reset_on_close(int fd) {
  const linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

/// Shrinks the socket's kernel receive buffer (the kernel doubles and clamps the value).
/// Shrinks an established connection's receive buffer. The window already advertised stays
/// (TCP never shrinks it), so the kernel drops data it has no room for and the sender waits
/// out retransmission timeouts, seconds under load: a client that will read what it asked
/// for passes `receive_buffer` to connect_loopback instead. Fine for a peer that never reads.
inline void set_receive_buffer(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

/// Deterministic test bytes: byte i of stream `seed` at stream offset `offset + i`. Cheap, and
/// a shifted or dropped byte shows up as a mismatch within a few bytes.
inline void fill_pattern(std::span<char> out, uint64_t seed, uint64_t offset = 0) {
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t x = (offset + i) * 0x9E3779B97F4A7C15ULL + seed * 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    out[i] = static_cast<char>(static_cast<uint8_t>(x >> 7));
  }
}

/// Index of the first byte of `got` that differs from stream `seed` at `offset`, or npos.
inline size_t first_pattern_mismatch(std::span<const char> got, uint64_t seed,
                                     uint64_t offset = 0) {
  char expected[4096];
  for (size_t done = 0; done < got.size(); done += sizeof expected) {
    const size_t n = std::min(sizeof expected, got.size() - done);
    fill_pattern(std::span<char>(expected, n), seed, offset + done);
    if (std::memcmp(expected, got.data() + done, n) != 0) {
      for (size_t i = 0; i < n; ++i) {
        if (expected[i] != got[done + i]) return done + i;
      }
    }
  }
  return std::string::npos;
}

/// Sends all of `out` while receiving exactly `in.size()` bytes, interleaved with poll(2), so a
/// large echo cannot deadlock with both sides' socket buffers full.
inline Result<void> exchange(int fd, std::span<const char> out, std::span<char> in,
                             int64_t timeout_ms = 10000) {
  const Deadline deadline(timeout_ms);
  size_t sent = 0;
  size_t got = 0;
  while (sent < out.size() || got < in.size()) {
    pollfd p{fd, 0, 0};
    if (sent < out.size()) p.events |= POLLOUT;
    if (got < in.size()) p.events |= POLLIN;
    const int ready = ::poll(&p, 1, deadline.remaining_ms());
    if (ready == 0) return Unexpected{std::errc::timed_out};
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Unexpected{last_error()};
    }
    if (got < in.size() && (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
      const ssize_t n = ::recv(fd, in.data() + got, in.size() - got, 0);
      if (n == 0) return Unexpected{std::errc::connection_aborted};
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Unexpected{last_error()};
      }
    }
    if (sent < out.size() && (p.revents & (POLLOUT | POLLERR)) != 0) {
      const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Unexpected{last_error()};
      }
    }
  }
  return {};
}

/// One echo round trip: sends `message` and expects the same bytes back. `scratch` must hold
/// at least message.size() bytes.
inline Result<void> echo_round_trip(int fd, std::span<const char> message, std::span<char> scratch,
                                    int64_t timeout_ms = 10000) {
  if (auto done = exchange(fd, message, scratch.first(message.size()), timeout_ms); !done) {
    return done;
  }
  if (std::memcmp(message.data(), scratch.data(), message.size()) != 0) {
    return Unexpected{std::errc::illegal_byte_sequence};
  }
  return {};
}

}  // namespace ucp::test
