#pragma once
// SetupError: a loop's own start-up allocation that failed, told apart from the kernel's errors
// (a ring over RLIMIT_MEMLOCK is ENOMEM too) so that EventLoop::describe_setup_error can name
// the key to lower (private to io/).

#include <system_error>

namespace ucp::detail {

enum class SetupError : int {
  kReceiveBuffers = 1,  // the receive buffers (or their ring) could not be mapped
};

const std::error_category& setup_error_category() noexcept;

inline std::error_code make_error_code(SetupError error) noexcept {
  return {static_cast<int>(error), setup_error_category()};
}

}  // namespace ucp::detail

template <>
struct std::is_error_code_enum<ucp::detail::SetupError> : std::true_type {};
