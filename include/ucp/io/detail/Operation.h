#pragma once
// Operation: one asynchronous operation as every backend understands it. An awaiter fills
// one in (what, on which fd, with which memory), the loop hands it to its backend, and the
// backend reports completions through the IoContext it derives from:
//
//   io_uring: the descriptor becomes an SQE (its address is the user_data) and each CQE a
//             completion;
//   epoll:    the descriptor is tried at once when the fd is known to be ready, otherwise
//             parked on the fd until epoll says so; its result becomes a completion.
//
// Either way a completion is delivered only while the loop walks its completions, never from
// inside submit(), and the descriptor and the memory it names must live until the last one.
// (LoopAccess::try_now is the one way to have an operation performed on the spot: it says so,
// and then nothing is in flight.)
//
// OperationAwaiter is the one base of the awaitable operations (io/Operations.h): it prepares
// nothing but the descriptor; `await_suspend` submits it. No awaiter submits to the kernel
// itself: the loop starts everything an iteration prepared in one batch.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstddef>
#include <cstdint>

#include "ucp/io/Timer.h"
#include "ucp/io/detail/IoContext.h"

namespace ucp {
class EventLoop;
}

namespace ucp::detail {

enum class OpCode : uint8_t {
  kRecv,              // fd, data/size: one receive; buffer_index >= 0: a registered buffer
  kRecvMultishot,     // fd: a completion per chunk, each in a loop receive buffer (kCompletionMore)
  kSend,              // fd, data/size (never raises SIGPIPE)
  kSendMsg,           // fd, data = msghdr*: a gathering send (never raises SIGPIPE); epoll sends
                      // consecutive ones on one datagram socket with one sendmmsg
  kRecvMsg,           // fd, data = msghdr*: one datagram with its source address
  kRecvMsgMultishot,  // fd, data = msghdr* (only msg_namelen and msg_controllen are read): a
                      // completion per datagram (0 bytes too), each in a loop receive buffer
                      // laid out as io/detail/DatagramLayout.h draws (kCompletionMore); ends only
                      // with an error, a cancel or ENOBUFS (a dry pool)
  kRead,              // fd, data/size at `offset` (kCurrentPosition: the file position)
  kWrite,             // fd, data/size at `offset`
  kAccept,            // fd, data = sockaddr* (filled), aux = socklen_t*; result: the new fd
  kAcceptMultishot,   // fd: a completion per accepted connection (kCompletionMore)
  kConnect,           // fd, data = const sockaddr*, size = its length
  kClose,             // fd: closes it (the loop forgets the fd first)
  kCancelFd,          // fd: ends every operation in flight on fd; result: how many
  kRingMessage,  // another loop's ring: value in `size` (io/detail/RingMessage.h; io_uring only)
  kOpenAt,       // fd = directory (AT_FDCWD), data = const char* path, size = open(2) flags,
                 // offset = mode; result: the new fd
  kFsync,        // fd; size = kFsyncDataOnly: fdatasync(2), else fsync(2)
  kSendFile,     // fd = socket, source_fd = file: up to `size` bytes of the file from
                 // `offset`; result: bytes sent (may be fewer), 0 at the end of the file
};

/// kFsync's `size`: only the data (and the metadata needed to read it back), as fdatasync(2).
inline constexpr uint32_t kFsyncDataOnly = 1;

inline constexpr uint64_t kCurrentPosition = ~uint64_t{0};

/// Layout of the kernel's __kernel_timespec, so public headers need no <liburing.h>.
struct KernelTimespec {
  int64_t tv_sec = 0;
  long long tv_nsec = 0;
  static KernelTimespec from_ms(uint64_t ms) noexcept {
    return {static_cast<int64_t>(ms / 1000), static_cast<long long>(ms % 1000) * 1000000LL};
  }
};

struct Operation;

/// Storage an operation with a deadline lends its backend: the operation ends with -ETIMEDOUT
/// (its result; data that arrived as the timer fired is returned, never lost) when `ms`
/// pass first. io_uring links an IORING_OP_LINK_TIMEOUT to the operation and waits for both
/// completions, in either order; epoll arms a loop timer that cancels the parked operation.
struct LinkedTimeout {
  struct Part : IoContext {
    Operation* operation = nullptr;
  };
  uint32_t ms = 0;
  KernelTimespec spec;  // io_uring reads it when the SQE is submitted
  Part operation_part;  // io_uring: the operation's own completion, held until the timer's
  Part timer_part;
  int32_t operation_result = 0;
  uint8_t remaining = 0;
  /// epoll: a loop timer, armed while the operation is parked, that ends it.
  struct Deadline : TimerNode {
    Operation* operation = nullptr;
    void* backend = nullptr;
  };
  Deadline timer;
};

// Every connection carries two of these (its receive and its send) and every awaiter one, so
// the fields are packed: no padding, and fields no operation uses together share storage.
struct Operation : IoContext {
  OpCode code = OpCode::kRecv;
  uint16_t backend_state = 0;  // backend bookkeeping
  int fd = -1;
  void* data = nullptr;  // see OpCode
  void* aux = nullptr;   // see OpCode
  uint64_t offset = kCurrentPosition;
  uint32_t size = 0;
  union {
    int32_t buffer_index = -1;  // a registered buffer holding `data` (kRecv, kRead), or -1
    int32_t source_fd;          // kSendFile: the file
  };
  LinkedTimeout* timeout = nullptr;
  // Backend bookkeeping: the epoll backend parks operations in per-fd lists.
  Operation* next = nullptr;
  Operation* prev = nullptr;
};

/// Base of the awaitable operations: the descriptor, submitted on suspension; resumed by its
/// (one) completion. `cancel()` asks the backend to end it early; it then completes with
/// -ECANCELED (or its real result, if that came first).
class OperationAwaiter {
 public:
  explicit OperationAwaiter(EventLoop& loop) noexcept : loop_(loop) {}
  OperationAwaiter(const OperationAwaiter&) = delete;
  OperationAwaiter& operator=(const OperationAwaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  /// False when the loop refused the operation (closing, or out of submission room): then
  /// `op_.result` says why and the coroutine goes on at once.
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  void cancel() noexcept;
  EventLoop& loop() const noexcept { return loop_; }

 protected:
  EventLoop& loop_;
  Operation op_;
};

}  // namespace ucp::detail
