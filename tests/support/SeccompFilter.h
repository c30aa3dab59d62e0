#pragma once
// SeccompFilter: makes io_uring_setup(2) fail with a chosen errno in the calling process and
// its children, the way a container's seccomp profile does (Docker's default returns EPERM),
// so that a test can see what UCP does where io_uring is blocked.
//
//   pid_t child = fork();
//   if (child == 0) {
//     if (!ucp::test::block_io_uring_setup(EPERM)) _exit(125);
//     execv(...);  // or test in the child
//   }
//
// Irreversible (PR_SET_NO_NEW_PRIVS + a SECCOMP_MODE_FILTER program): call it only in a forked
// child. Only async-signal-safe calls, so it may run between fork and exec.

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

namespace ucp::test {

#if defined(__x86_64__)
inline constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "SeccompFilter.h: add this architecture's AUDIT_ARCH_* value"
#endif

/// Installs the filter; false if the kernel refused it.
inline bool block_io_uring_setup(int error = EPERM) noexcept {
  constexpr auto kLoadWord = static_cast<uint16_t>(BPF_LD | BPF_W | BPF_ABS);
  constexpr auto kJumpIfEqual = static_cast<uint16_t>(BPF_JMP | BPF_JEQ | BPF_K);
  constexpr auto kReturn = static_cast<uint16_t>(BPF_RET | BPF_K);
  sock_filter program[] = {
      // Another architecture's system call numbers mean other calls: let them through.
      {kLoadWord, 0, 0, offsetof(seccomp_data, arch)},
      {kJumpIfEqual, 1, 0, kAuditArch},
      {kReturn, 0, 0, SECCOMP_RET_ALLOW},
      {kLoadWord, 0, 0, offsetof(seccomp_data, nr)},
      {kJumpIfEqual, 0, 1, __NR_io_uring_setup},
      {kReturn, 0, 0, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)},
      {kReturn, 0, 0, SECCOMP_RET_ALLOW},
  };
  sock_fprog filter{static_cast<unsigned short>(sizeof program / sizeof program[0]), program};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) == 0;
}

}  // namespace ucp::test
