#pragma once
// MultishotAccept: one accept operation that accepts connection after connection; each new fd
// goes to `on_accept` straight from the completion (no coroutine switch per connection). Its
// owner holds it as a base and makes on_accept with hook<&Owner::f> (ucp/base/Hook.h).
// Awaiting it starts it and resumes when the backend ends it (an error such as EMFILE, or
// the kernel stopping it, e.g. on CQ overflow), so the owner can back off and await again.
// Requires LoopCapabilities::multishot_accept; otherwise use io::accept in a loop.
//
// Thread contract: the owning loop's thread only.

#include <coroutine>
#include <cstdint>

#include "ucp/base/Hook.h"
#include "ucp/base/Result.h"
#include "ucp/io/detail/Operation.h"

namespace ucp::detail {

class MultishotAccept : private Operation {
 public:
  using OnAccept = void (*)(MultishotAccept& self, int fd) noexcept;
  MultishotAccept(EventLoop& loop, int listen_fd, OnAccept on_accept) noexcept;
  MultishotAccept(const MultishotAccept&) = delete;
  MultishotAccept& operator=(const MultishotAccept&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept;
  /// Why it ended: an error (EMFILE, ECANCELED...) or success (the kernel just stopped it).
  Result<void> await_resume() const noexcept { return void_from_cqe(last_error_); }
  /// Asks it to end (the awaiting coroutine resumes with operation_canceled).
  void cancel() noexcept;
  EventLoop& loop() const noexcept { return loop_; }

 private:
  friend HookAccess;
  std::coroutine_handle<> on_done(int32_t res, uint32_t completion) noexcept;
  Operation& op() noexcept { return *this; }

  EventLoop& loop_;
  OnAccept on_accept_;
  int32_t last_error_ = 0;
  bool running_ = false;
};

}  // namespace ucp::detail
