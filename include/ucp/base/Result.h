#pragma once
// Result<T>: the value of an operation or the std::error_code that says why it failed.
// Mirrors the part of std::expected<T, std::error_code> UCP uses (has_value, *, ->, error()),
// so that it can become an alias when the project moves to C++23.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace ucp {

/// Wraps an error for construction of a Result, like std::unexpected.
struct Unexpected {
  std::error_code error;
  explicit Unexpected(std::error_code e) noexcept : error(e) {}
  explicit Unexpected(std::errc e) noexcept : error(std::make_error_code(e)) {}
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) noexcept(std::is_nothrow_move_constructible_v<T>)  // NOLINT: implicit by design
      : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Unexpected u) noexcept : state_(std::in_place_index<1>, u.error) {}  // NOLINT

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & noexcept { return std::get<0>(state_); }
  const T& value() const& noexcept { return std::get<0>(state_); }
  T&& value() && noexcept { return std::get<0>(std::move(state_)); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T&& operator*() && noexcept { return std::move(*this).value(); }
  T* operator->() noexcept { return &value(); }
  const T* operator->() const noexcept { return &value(); }
  std::error_code error() const noexcept {
    return has_value() ? std::error_code{} : std::get<1>(state_);
  }
  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, std::error_code> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() noexcept = default;
  Result(Unexpected u) noexcept : error_(u.error) {}  // NOLINT: implicit by design
  bool has_value() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return has_value(); }
  std::error_code error() const noexcept { return error_; }

 private:
  std::error_code error_;
};

/// The one conversion from a kernel result (>= 0 count, < 0 -errno) to a Result.
inline std::error_code error_from_errno(int errno_value) noexcept {
  return {errno_value, std::system_category()};
}
inline Result<size_t> bytes_from_cqe(int32_t res) noexcept {
  if (res < 0) return Unexpected{error_from_errno(-res)};
  return static_cast<size_t>(res);
}
inline Result<void> void_from_cqe(int32_t res) noexcept {
  if (res < 0) return Unexpected{error_from_errno(-res)};
  return {};
}

}  // namespace ucp
