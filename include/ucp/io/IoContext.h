#pragma once
// IoContext: one in-flight io_uring operation. Its address is the SQE's user_data, so the
// CQE finds it again; it lives in the frame of the coroutine that awaits it (or in the
// object that owns a multishot operation) until its last CQE has arrived.

#include <coroutine>
#include <cstdint>

namespace ucp {

struct IoContext {
  /// Called for every CQE of this operation. Returns the coroutine to resume, or a null
  /// handle. One-shot operations use `complete_once`; multishot owners install their own.
  using CompletionFn = std::coroutine_handle<> (*)(IoContext&, int32_t res,
                                                   uint32_t cqe_flags) noexcept;

  static std::coroutine_handle<> complete_once(IoContext& context, int32_t res,
                                               uint32_t cqe_flags) noexcept {
    context.result = res;
    context.cqe_flags = cqe_flags;
    return context.waiter;
  }

  CompletionFn on_cqe = &complete_once;
  std::coroutine_handle<> waiter;
  int32_t result = 0;      // >= 0: bytes or fd; < 0: -errno
  uint32_t cqe_flags = 0;  // IORING_CQE_F_MORE, F_BUFFER (+ buffer id)
};

namespace io {

/// Layout of the kernel's __kernel_timespec, so public headers need no <liburing.h>.
struct KernelTimespec {
  int64_t tv_sec = 0;
  long long tv_nsec = 0;
  static KernelTimespec from_ms(uint64_t ms) noexcept {
    return {static_cast<int64_t>(ms / 1000), static_cast<long long>(ms % 1000) * 1000000LL};
  }
};

}  // namespace io
}  // namespace ucp
