#pragma once
// EpollBackend: the readiness backend of an EventLoop, for hosts where io_uring is blocked
// (a container's seccomp profile, sysctl kernel.io_uring_disabled, an old kernel). It completes
// the same operations as the io_uring backend, with the same results and completion flags, by
// doing the non-blocking system call itself when epoll says the fd is ready.
//
//   try_now(): a send on an attached stream socket known to be writable, nothing queued
//              before it: sent here; on EAGAIN nothing is done and it is submitted instead
//   submit() --queue--> poll(): try what the fd's hints say is ready (one syscall each),
//                               park the rest on the fd (FIFO per direction)
//                        epoll_wait (edge-triggered; skipped once when completions are
//                               already in hand): an event sets the fd's hints and runs
//                               its parked operations in order until one would block
//                        deliver the completions gathered in this poll (at most `limit`)
//
// Per fd (a vector indexed by fd number; an operation is parked through its own links, so
// nothing is allocated per operation):
// - Attached fds (LoopAccess::attach: connections, listeners, the wake-up eventfd) have one
//   persistent EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET registration and readiness hints: set by an
//   event, cleared by EAGAIN or, on a stream socket, by a short read or send (the socket is
//   then drained or full, and the next change brings a new edge). So a request costs one recv,
//   one send and a share of one epoll_wait, with no EAGAIN probes and no epoll_ctl.
// - Other fds (a signalfd, a pipe, a test's socketpair) are tried once, and registered
//   EPOLLONESHOT only while an operation waits. Nothing about them outlives their last waiter,
//   so an fd closed behind the loop's back and its number reused never inherits stale state;
//   events carry a per-fd generation, and events of an old registration are ignored.
//
// Never blocking the loop: socket sends and receives pass MSG_DONTWAIT (and sends
// MSG_NOSIGNAL), so a blocking socket the application created stays blocking for its own use.
// read/write on pipes and eventfds, accept and connect have no such flag: the backend sets
// O_NONBLOCK on such an fd the first time it works on it. Accepted sockets are non-blocking.
//
// Files (regular files and block devices, which epoll cannot watch): a read or write is first
// tried with RWF_NOWAIT, which a page-cache hit completes at once; only what would wait for the
// disk goes to two worker threads (FileWorkers), and so do O_DIRECT reads and writes (RWF_NOWAIT
// would not keep them from waiting for the device), openat and fsync. Measured in
// docs/benchmarks.md.
//
// Datagrams: a multishot datagram receive is recvmmsg into free receive buffers (up to 32 per
// call), each written in io_uring's layout (io/detail/DatagramLayout.h); sendmsg operations
// submitted back to back on one datagram socket go out in one sendmmsg. kSendFile is sendfile(2)
// when the socket is writable.
//
// Differences from io_uring, all at the edges: operations still parked on an fd closed through
// the loop (io::close) end with -ECANCELED (io_uring would leave them waiting on the file);
// kRingMessage is refused with -EOPNOTSUPP (LoopCapabilities::ring_messages is false) and
// registered buffers do not exist.
//
// Thread contract: the owning loop's thread only (created anywhere); FileWorkers inside has its
// own threads.
//
// The class is defined in five files, one per responsibility (EpollState.h lists them).

#include <memory>
#include <string>
#include <vector>

#include <sys/epoll.h>

#include "../Backend.h"
#include "BufferStack.h"
#include "FileWorkers.h"

namespace ucp::detail {

class EpollBackend;

/// An operation's deadline on this backend, in its LinkedTimeout's storage: a loop timer,
/// armed while the operation is parked, that ends it with -ETIMEDOUT. Made the first time the
/// operation parks and ended with the LinkedTimeout (LinkedTimeout::end), so a timer the heap
/// still holds (cancelled lazily) leaves it then.
struct EpollDeadline : TimerNode {
  Operation* operation = nullptr;
  EpollBackend* backend = nullptr;
};

class EpollBackend final : public Backend {
 public:
  static constexpr size_t kFileWorkers = 2;
  /// Receives or accepts per readiness event before other fds get their turn; the rest
  /// continues in the next iteration, without waiting for a new edge.
  static constexpr int kMultishotBudget = 16;
  /// Sendmsg operations on one datagram socket sent with one sendmmsg, at most.
  static constexpr size_t kSendBatch = 64;

  static Result<std::unique_ptr<EpollBackend>> create(EventLoop& owner, const LoopOptions& options,
                                                      std::string& warnings);
  ~EpollBackend() override;

  Result<void> enable() override { return {}; }
  bool submit(Operation& op) noexcept override;
  bool try_now(Operation& op) noexcept override;
  void cancel(Operation& op) noexcept override;
  void poll(bool block, std::chrono::nanoseconds timeout, ReadyList& ready,
            uint32_t limit) override;
  void cancel_all() noexcept override;
  uint64_t in_flight() const noexcept override { return in_flight_; }
  void attach(int fd) noexcept override;
  void detach(int fd) noexcept override;

  ReceiveBuffers* receive_buffers() noexcept override { return buffers_.get(); }

  BackendKind kind() const noexcept override { return BackendKind::kEpoll; }
  const char* name() const noexcept override { return "epoll"; }
  std::string describe() const override;

  /// Off: every file read and write goes to the worker threads, without the RWF_NOWAIT try
  /// (for tests of the workers, and for measuring them).
  void set_file_nowait(bool on) noexcept { file_nowait_ = on; }
  /// Worker threads running (they start with the first file operation that needs them).
  bool file_workers_started() const noexcept { return workers_.started(); }

 private:
  // What an operation waits for; its list on the fd.
  enum class Direction : uint8_t { kNone, kRead, kWrite };
  enum class Outcome : uint8_t { kCompleted, kBlocked, kBudgetSpent };

  struct WaitList {
    Operation* head = nullptr;
    Operation* tail = nullptr;
    bool empty() const noexcept { return head == nullptr; }
  };

  struct FdState {
    WaitList readers;
    WaitList writers;
    uint32_t generation = 0;  // bumped whenever the state is forgotten
    uint32_t armed = 0;       // not attached: the events of the one-shot registration
    bool attached = false;    // persistent edge-triggered registration
    bool in_set = false;      // (probably) in the epoll set: try MOD before ADD
    bool readable = false;    // hints
    bool writable = false;
    bool read_closed = false;  // an event said RDHUP/HUP/ERR: reads no longer wait, ever
    bool nonblocking = false;  // attached: O_NONBLOCK known to be set
    int8_t stream = -1;        // attached: a SOCK_STREAM socket? -1 = not known yet
    bool revisit = false;      // in revisit_: ready work left over from a spent budget
  };

  struct Completion {
    Operation* op;
    int32_t res;
    uint32_t flags;
  };

  EpollBackend(EventLoop& owner, int epoll_fd) noexcept;

  FdState& state_of(int fd);
  static Direction direction_of(OpCode code) noexcept;
  WaitList& list_of(FdState& s, Direction d) noexcept {
    return d == Direction::kRead ? s.readers : s.writers;
  }

  void start_submitted() noexcept;
  Operation* take_submitted() noexcept;
  void start_send_batch() noexcept;
  size_t send_datagrams(int fd, FdState& s) noexcept;
  void start_file_call(Operation& op) noexcept;
  void start(Operation& op) noexcept;
  void start_io(Operation& op) noexcept;
  void start_file(Operation& op) noexcept;
  void close_fd(Operation& op) noexcept;
  void cancel_fd(Operation& op) noexcept;

  Outcome perform(Operation& op, FdState& s) noexcept;
  Outcome receive_multishot(Operation& op, FdState& s) noexcept;
  Outcome receive_datagrams(Operation& op, FdState& s) noexcept;
  Outcome accept_multishot(Operation& op, FdState& s) noexcept;
  int32_t connect_step(Operation& op) noexcept;
  bool ensure_nonblocking(int fd, FdState& s) noexcept;
  bool is_stream(int fd, FdState& s) noexcept;
  bool drained(int fd, FdState& s, Direction d) noexcept;
  void clear_hint(FdState& s, Direction d) noexcept;

  void park(Operation& op, FdState& s, Direction d) noexcept;
  void unlink(Operation& op, FdState& s, Direction d) noexcept;
  void run_waiters(int fd, FdState& s) noexcept;
  void settle(int fd, FdState& s) noexcept;
  void arm_one_shot(int fd, FdState& s, uint32_t events) noexcept;
  void forget(FdState& s) noexcept;
  size_t cancel_parked(FdState& s, int32_t res) noexcept;
  void on_event(const epoll_event& event) noexcept;
  void on_files_done() noexcept;
  bool start_file_workers() noexcept;
  static void on_deadline(TimerNode& node) noexcept;

  void complete(Operation& op, int32_t res, uint32_t flags = 0) noexcept;
  void deliver_completions(ReadyList& ready, uint32_t limit);

  EventLoop& owner_;
  UniqueFd epoll_fd_;
  std::vector<FdState> fds_;
  // Submitted, not yet started (linked through Operation::next/prev).
  Operation* submitted_head_ = nullptr;
  Operation* submitted_tail_ = nullptr;
  std::vector<int> revisit_;
  std::vector<int> revisiting_;
  std::vector<Completion> completions_;
  size_t completions_head_ = 0;
  std::vector<epoll_event> events_;
  std::unique_ptr<BufferStack> buffers_;
  FileWorkers workers_{kFileWorkers};
  bool workers_registered_ = false;
  std::vector<FileWorkers::Done> files_done_;
  std::vector<Operation*> scratch_;
  std::vector<Operation*> send_batch_;
  uint64_t in_flight_ = 0;
  bool file_nowait_ = true;
  bool skipped_wait_ = false;  // the last poll delivered completions without epoll_wait
};

}  // namespace ucp::detail
