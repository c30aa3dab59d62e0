#pragma once
// Deadlines: a per-loop list of coarse deadlines (read timeouts of connections whose reads
// come from a multishot receive, where no IORING_OP_LINK_TIMEOUT can be attached per read).
// One IORING_OP_TIMEOUT tick per loop sweeps the list while it is not empty, so a thousand
// waiting readers cost one timer, not a thousand (IO_URING_PITFALLS #19).
//
// A deadline fires between its due time and one tick later; the tick is a quarter of the
// shortest timeout seen (at least 5 ms), so a timeout T fires within [T, 1.25 T + 5 ms].
//
// Thread contract: the owning loop's thread only.

#include <cstdint>

namespace ucp::io {

struct DeadlineNode {
  DeadlineNode* prev = nullptr;
  DeadlineNode* next = nullptr;
  uint64_t due_ms = 0;
  void (*fire)(DeadlineNode&) noexcept = nullptr;
  bool linked = false;
};

/// Monotonic milliseconds from the coarse clock (a few ms resolution, no syscall).
uint64_t coarse_now_ms() noexcept;

}  // namespace ucp::io
