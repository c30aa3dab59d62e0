#pragma once
// BackendSelection: which backend a loop runs on (private to io/). LoopOptions::backend says
// what was asked for:
//
//   kIoUring  io_uring or fail;
//   kEpoll    epoll;
//   kAuto     io_uring, or epoll when io_uring cannot be used on this host at all: setup
//             refused with EPERM (seccomp filter, sysctl kernel.io_uring_disabled), ENOSYS (no
//             io_uring in the kernel, or a filter that says so) or EINVAL (a kernel too old for
//             the ring UCP sets up). One warning line says which and how to get io_uring back.
//             ENOMEM, EMFILE and the like are limits of this process, not of the host: they
//             fail, as they would with kIoUring.
//
// The diagnosis reads /proc/sys/kernel/io_uring_disabled and the Seccomp field of
// /proc/self/status, so the message can name the cause instead of listing every possibility.
//
// Thread contract: any thread (it only reads /proc and creates the backend).

#include <memory>
#include <string>
#include <system_error>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"

namespace ucp::detail {

class Backend;

Result<std::unique_ptr<Backend>> create_backend(EventLoop& owner, const LoopOptions& options,
                                                const EventLoop* share_with, std::string& warnings);

/// One line that says what a create() failure means (EventLoop::describe_setup_error).
std::string describe_backend_setup_error(std::error_code error, const LoopOptions& options);

/// True for io_uring set-up errors that mean "not on this host" (EPERM, ENOSYS, EINVAL).
bool io_uring_unavailable(std::error_code error) noexcept;

/// Why io_uring set-up failed with `error` ("io_uring is blocked by a seccomp filter ...
/// [Operation not permitted]") and what would bring it back ("allow it in the container's
/// seccomp profile (...)").
struct IoUringDiagnosis {
  std::string cause;
  std::string remedy;
};
IoUringDiagnosis diagnose_io_uring(std::error_code error);

}  // namespace ucp::detail
