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
#include <new>

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

struct Operation;

/// What an operation with a deadline lends its backend: the operation ends with -ETIMEDOUT
/// (its result; data that arrived as the timer fired is returned, never lost) when `ms` pass
/// first. Lives beside the operation (the awaiter, or the pooled state of a read) until its
/// last completion.
///
/// How a deadline is kept is each backend's business, so its bookkeeping is not spelled out
/// here: io_uring links an IORING_OP_LINK_TIMEOUT to the operation and waits for both
/// completions in either order (two completion contexts and the timespec the kernel reads),
/// epoll arms a loop timer while the operation is parked. A loop runs one backend, so the
/// bytes below hold one backend's state at a time: the backend constructs it in `storage`
/// (its own type, which static_asserts that it fits) when it starts the operation, and sets
/// `end` if that state must be ended before the bytes go (epoll's timer leaves the heap).
struct LinkedTimeout {
  /// The larger of the two backends' states: io_uring's, two 32-byte completion contexts, a
  /// 16-byte timespec and a count (epoll's, a timer node and two pointers, is 56).
  static constexpr size_t kStorageBytes = 88;

  LinkedTimeout() noexcept = default;
  LinkedTimeout(const LinkedTimeout&) = delete;
  LinkedTimeout& operator=(const LinkedTimeout&) = delete;
  ~LinkedTimeout() {
    if (end != nullptr) end(*this);
  }

  /// The backend's state, as the type it constructed (for the backends only).
  template <class State>
  State& state() noexcept {
    static_assert(sizeof(State) <= kStorageBytes && alignof(State) <= alignof(void*));
    return *std::launder(reinterpret_cast<State*>(storage));
  }

  uint32_t ms = 0;
  void (*end)(LinkedTimeout&) noexcept = nullptr;
  alignas(void*) std::byte storage[kStorageBytes];
};

// Every connection carries two of these (its receive and its send) and every awaiter one, so
// the fields are packed: no padding, and fields no operation uses together share storage.
//
// The descriptor is the same for every backend. Two parts of it are a backend's own:
// `backend_state` (16 bits where the layout has room anyway: io_uring marks an operation
// whose cancel must target its linked deadline, epoll keeps its state machine) and the
// `next`/`prev` links. Those 16 bytes stay here, although only epoll uses them, because they
// cannot leave at no cost: epoll parks every operation that must wait in a FIFO list per fd,
// and intrusive links are what make parking free of allocation and of any lookup; a side
// table on the epoll backend would cost one of those per parked operation, and io_uring needs
// nothing per operation that the links could be shared with.
struct Operation : IoContext {
  OpCode code = OpCode::kRecv;
  uint16_t backend_state = 0;  // the backend's (see above)
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
  // The backend's (see above): epoll's per-fd wait list.
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
