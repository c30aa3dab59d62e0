#pragma once
// OutputLimits: what bounds a connection's queued output and how long it may wait for the peer
// (TcpConnection::write and write_all; docs/limits.md). ServerOptions and ClientOptions carry
// one for their connections.
//
// Thread contract: none (plain data).

#include <cstdint>

#include "ucp/base/Defaults.h"

namespace ucp {

/// What bounds a connection's queued output (TcpServer fills it from ServerOptions).
struct OutputLimits {
  /// write() completes without waiting while the queue holds at most this many bytes.
  uint64_t max_output_bytes = defaults::kMaxOutputBytes;
  /// Queued output that waits this long without the peer taking a byte fails with timed_out
  /// (the connection is then closed by its handler). 0 = no limit while open.
  uint32_t write_timeout_ms = defaults::kWriteTimeoutMs;
  /// close() waits for queued output this long without a byte taken, then drops it.
  uint32_t close_flush_timeout_ms = defaults::kShutdownTimeoutMs;
};

}  // namespace ucp
