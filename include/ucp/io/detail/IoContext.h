#pragma once
// IoContext: where the completions of one in-flight operation go. Its address travels with
// the operation through the backend (on io_uring it is the SQE's user_data), so a completion
// finds it again; it lives in the frame of the coroutine that awaits it (or in the object that
// owns a multishot operation) until its last completion has arrived.
//
// The name is the original design's and means one operation's context, the one passed as
// user_data. It is not Asio's io_context (an event loop and executor): UCP's counterpart of
// that is EventLoop.
//
// Completion flags are the same on every backend:
//
//   bit 0   kCompletionBuffer  the data went into a loop receive buffer; its id is bits 16..31
//   bit 1   kCompletionMore    more completions of this operation follow (multishot)
//
// (This is the io_uring CQE flag layout, so that backend passes its flags through untouched.)

#include <coroutine>
#include <cstdint>

namespace ucp::detail {

inline constexpr uint32_t kCompletionBuffer = 1u << 0;
inline constexpr uint32_t kCompletionMore = 1u << 1;
inline constexpr uint32_t kBufferIdShift = 16;

inline uint16_t buffer_id_of(uint32_t flags) noexcept {
  return static_cast<uint16_t>(flags >> kBufferIdShift);
}

/// One operation's completion target (see above). Lives in its owner (the awaiting frame or
/// the multishot object); the owning loop's thread only.
struct IoContext {
  /// Called for every completion of this operation. Returns the coroutine to resume, or a
  /// null handle. One-shot operations use `complete_once`; multishot owners install their own.
  using CompletionFn = std::coroutine_handle<> (*)(IoContext&, int32_t res,
                                                   uint32_t flags) noexcept;

  static std::coroutine_handle<> complete_once(IoContext& context, int32_t res,
                                               uint32_t flags) noexcept {
    context.result = res;
    context.flags = flags;
    return context.waiter;
  }

  CompletionFn on_complete = &complete_once;
  std::coroutine_handle<> waiter;
  int32_t result = 0;  // >= 0: bytes or fd; < 0: -errno
  uint32_t flags = 0;  // kCompletionMore, kCompletionBuffer (+ buffer id)
};

}  // namespace ucp::detail
