#pragma once
// RingHandOff: an opt-in way for TcpServer to hand accepted connections to worker loops, ring
// to ring (io/detail/RingMessage.h: IORING_OP_MSG_RING, io_uring 5.18+; server option
// msg_ring_handoff). The main ring sends the fd number straight into the worker's ring as
// part of its normal submit batch. Measured no faster than the default task queue + eventfd
// (0.98x connections per second under churn, docs/benchmarks.md), so it is off by default and
// kept out of the server's own path.
//
// The fd stays the main loop's until the main ring's own completion confirms delivery; a
// send that is refused or fails (e.g. EOVERFLOW: the worker's CQ is full) gives the fd back
// through TcpServer::fall_back_from_ring, so no connection is lost. Each worker's mailbox
// counts messages on their way, and a stopping worker keeps reaping until they have arrived
// (see LoopAccess::set_message_handler); those arrive at TcpServer::deliver_from_ring while the
// worker is closing.
//
// Thread contract: construction, probe() and send() on the main loop's thread;
// deliver_from_ring runs on the worker's thread.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ucp/base/UniqueFd.h"
#include "ucp/coro/Task.h"
#include "ucp/io/EventLoop.h"
#include "ucp/io/detail/RingMessage.h"

namespace ucp {
class TcpServer;
}

namespace ucp::detail {

class RingHandOff {
 public:
  RingHandOff(EventLoop& main_loop, std::vector<EventLoop*> workers, TcpServer& server);
  RingHandOff(const RingHandOff&) = delete;
  RingHandOff& operator=(const RingHandOff&) = delete;
  ~RingHandOff();

  /// Before the first connection: every worker must receive one probe message within 2 s
  /// (MSG_RING has to wake a worker blocked in io_uring_enter, also when DEFER_TASKRUN turns
  /// the delivery into task work; missed wake-ups have been reported on some kernels). If that
  /// fails, one WARN and active() turns false. Ends early when `stopping` turns true.
  Task<> probe(const bool& stopping);
  bool active() const noexcept { return active_; }
  /// Sends `fd` to worker `index`. True: it is on its way (fd released). False: refused at
  /// once, `fd` untouched.
  bool send(size_t index, UniqueFd& fd);
  /// Connections that reached a worker through the ring.
  uint64_t delivered() const noexcept { return delivered_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  void on_sent(Slot& slot, Result<void> delivered) noexcept;
  void receive(size_t index, int32_t value);

  EventLoop& main_loop_;
  std::vector<EventLoop*> workers_;
  TcpServer& server_;
  bool active_ = true;
  std::vector<std::unique_ptr<Slot>> slots_;  // fds on their way, reused through a free list
  Slot* free_ = nullptr;
  std::atomic<size_t> probes_received_{0};
  std::atomic<uint64_t> delivered_{0};
  std::chrono::steady_clock::time_point last_warning_{};
};

}  // namespace ucp::detail
