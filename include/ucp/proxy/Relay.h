#pragma once
// relay(): moves bytes both ways between two connections of one loop until both directions have
// ended: the TCP proxy's data path.
//
//   RelayResult r = co_await relay(client, upstream, {.idle_timeout_ms = 60000}, &counters);
//   co_await upstream.close();    // the caller closes both (TcpServer closes the client)
//
// Each direction is a loop: receive into a buffer the loop lends (receive_into: on io_uring the
// multishot receive's provided buffer), then send those same bytes to the other side
// (write_all sends from the caller's memory). No byte is copied in user space, and a buffer goes
// back to the loop once its bytes are in the kernel. Back-pressure is the loop's own: while a
// direction waits for a slow reader, its receive queue fills to its bound and the multishot
// receive pauses, so the sender's window closes. A relayed pair holds at most about
// (MultishotRecv::kMaxQueued + 1) receive buffers per direction, whatever the peers do.
//
// Endings, passed on as TCP says:
// - FIN: a direction whose source sends FIN shuts the other side's writing down (FIN once the
//   bytes before it are sent); the other direction goes on (half-close).
// - RST: a side that resets (a receive fails with connection_reset, or a send to it fails with
//   connection_reset or broken_pipe) gets its partner reset too: SO_LINGER 0 and a disconnect, so
//   the partner sees a RST, not a FIN. Both directions end.
// - idle_timeout_ms without a byte either way, or total_timeout_ms since the start: both
//   directions end and the connections close normally. Output a side takes no byte of for
//   idle_timeout_ms fails the same way (each connection's write timeout is set to it).
// - any other error on either side ends both directions.
// relay() itself never closes a connection; it stops reading both and leaves closing (which
// flushes what is queued) to the caller.
//
// Thread contract: the connections' loop thread; both connections on that loop.

#include <atomic>
#include <cstdint>
#include <system_error>

#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/net/TcpConnection.h"

namespace ucp::proxy {

struct RelayOptions {
  uint32_t idle_timeout_ms = 60000;  // 0 = none
  uint32_t total_timeout_ms = 0;     // 0 = none
};

/// Why a relay ended.
enum class RelayEnd : uint8_t {
  kClosed,         // both sides sent FIN
  kIdleTimeout,    // nothing moved for idle_timeout_ms (or a side took no output that long)
  kTotalTimeout,   // total_timeout_ms passed
  kClientReset,    // the client reset (passed on to the upstream)
  kUpstreamReset,  // the upstream reset (passed on to the client)
  kClientError,    // another error on the client side
  kUpstreamError,  // another error on the upstream side
  kStopped,        // a read was cancelled from outside (a draining server)
};
const char* to_string(RelayEnd end) noexcept;

/// Per-worker counters a relay adds to as bytes move (one writer: the worker's thread; readers
/// anywhere: relaxed atomics written with a plain store, which costs what a plain add does).
struct RelayCounters {
  std::atomic<uint64_t> client_to_upstream{0};
  std::atomic<uint64_t> upstream_to_client{0};
  static void add(std::atomic<uint64_t>& counter, uint64_t n) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

struct RelayResult {
  RelayEnd end = RelayEnd::kClosed;
  std::error_code error;  // the error behind kClientError / kUpstreamError
  uint64_t client_to_upstream = 0;
  uint64_t upstream_to_client = 0;
};

/// Relays until both directions end. `first_to_upstream` holds bytes already received from the
/// client (after a PROXY header, say): they are sent first.
Task<RelayResult> relay(TcpConnection& client, TcpConnection& upstream, RelayOptions options,
                        RelayCounters* counters = nullptr, BufferLease first_to_upstream = {});

/// Resets `connection` now: SO_LINGER 0 and a disconnect, so its peer gets a RST (not a FIN)
/// and every operation on it ends. Close it as usual afterwards.
void reset_connection(TcpConnection& connection) noexcept;

}  // namespace ucp::proxy
