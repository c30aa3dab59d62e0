#include "BackendSelection.h"

#include <cerrno>
#include <fstream>
#include <system_error>

#include <sys/utsname.h>

#include "epoll/EpollBackend.h"
#include "uring/IoUring.h"
#include "uring/UringBackend.h"

namespace ucp::detail {

namespace {

// /proc/sys/kernel/io_uring_disabled: 0 allowed, 1 only for members of kernel.io_uring_group
// (and CAP_SYS_ADMIN), 2 disabled; -1 when the kernel has no such sysctl (before 6.6).
int io_uring_disabled_sysctl() {
  std::ifstream in("/proc/sys/kernel/io_uring_disabled");
  int value = -1;
  if (!(in >> value)) return -1;
  return value;
}

// A seccomp filter is installed on this process (Seccomp: 2 in /proc/self/status).
bool under_seccomp_filter() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
  }
  return false;
}

std::string kernel_release() {
  utsname name{};
  if (::uname(&name) != 0) return "unknown";
  return name.release;
}

constexpr const char* kSeccompRemedy =
    "allow it in the container's seccomp profile (docker run --security-opt "
    "seccomp=deploy/seccomp-io_uring.json; Kubernetes: securityContext.seccompProfile; README "
    "\"Running in containers\")";

}  // namespace

bool io_uring_unavailable(std::error_code error) noexcept {
  // Compared as conditions: the kernel's refusals in either the system or the generic category,
  // never a set-up error of ours (SetupError) that happens to share a value.
  return error == std::errc::operation_not_permitted ||
         error == std::errc::function_not_supported || error == std::errc::invalid_argument;
}

IoUringDiagnosis diagnose_io_uring(std::error_code error) {
  const std::string code = " [" + error.message() + "]";
  const int disabled = io_uring_disabled_sysctl();
  switch (error.value()) {
    case EPERM:
      if (disabled == 2) {
        return {"io_uring is disabled by sysctl kernel.io_uring_disabled = 2" + code,
                "enable it with `sysctl -w kernel.io_uring_disabled=0` (as root)"};
      }
      if (disabled == 1) {
        return {
            "io_uring is restricted by sysctl kernel.io_uring_disabled = 1 to members of the "
            "group kernel.io_uring_group" +
                code,
            "run as a member of that group, or `sysctl -w kernel.io_uring_disabled=0` (as "
            "root)"};
      }
      if (under_seccomp_filter()) {
        return {
            "io_uring is blocked by a seccomp filter (e.g. Docker's or containerd's default "
            "profile)" +
                code,
            kSeccompRemedy};
      }
      return {
          "io_uring_setup was refused (EPERM) without a seccomp filter or sysctl "
          "kernel.io_uring_disabled saying so (a security module or sandbox such as gVisor?)" +
              code,
          "allow io_uring_setup for this process"};
    case ENOSYS:
      if (under_seccomp_filter()) {
        return {"io_uring is blocked by a seccomp filter (or missing from the kernel)" + code,
                kSeccompRemedy};
      }
      return {"the kernel (" + kernel_release() +
                  ") has no io_uring (built without CONFIG_IO_URING, or older than 5.1)" + code,
              "run on a kernel with io_uring (5.19 or later; 6.1+ for every feature)"};
    case EINVAL:
      return {"the kernel (" + kernel_release() +
                  ") is too old for the io_uring set-up UCP uses (IORING_SETUP_SUBMIT_ALL and "
                  "R_DISABLED need 5.18)" +
                  code,
              "run on kernel 5.19 or later (6.1+ for every feature)"};
    default:
      return {"io_uring set-up failed" + code, "see the error"};
  }
}

std::string describe_backend_setup_error(std::error_code error, const LoopOptions& options) {
  if (options.backend == BackendKind::kEpoll) {
    return "cannot set up the epoll backend: " + error.message();
  }
  if (!io_uring_unavailable(error)) return describe_setup_error(error, options);  // limits
  const IoUringDiagnosis why = diagnose_io_uring(error);
  std::string text = why.cause + "; to use io_uring, " + why.remedy;
  if (options.backend == BackendKind::kIoUring) {
    text += "; or set event_loop.backend = auto to run on epoll where io_uring is unavailable";
  }
  return text;
}

Result<std::unique_ptr<Backend>> create_backend(EventLoop& owner, const LoopOptions& options,
                                                const EventLoop* share_with,
                                                std::string& warnings) {
  if (options.backend == BackendKind::kEpoll) {
    auto epoll = EpollBackend::create(owner, options, warnings);
    if (!epoll) return Unexpected{epoll.error()};
    return std::unique_ptr<Backend>(std::move(*epoll));
  }
  // A failed attempt may have noted warnings about io_uring features: they no longer apply.
  std::string uring_notes;
  auto uring = UringBackend::create(owner, options, share_with, uring_notes);
  if (uring) {
    warnings += uring_notes;
    return std::unique_ptr<Backend>(std::move(*uring));
  }
  if (options.backend == BackendKind::kIoUring || !io_uring_unavailable(uring.error())) {
    return Unexpected{uring.error()};
  }
  std::string epoll_notes;
  auto epoll = EpollBackend::create(owner, options, epoll_notes);
  if (!epoll) return Unexpected{epoll.error()};
  const IoUringDiagnosis why = diagnose_io_uring(uring.error());
  warnings += "backend: " + why.cause +
              ": running on epoll instead (same API and behaviour); to use io_uring, " +
              why.remedy + "\n" + epoll_notes;
  return std::unique_ptr<Backend>(std::move(*epoll));
}

}  // namespace ucp::detail
