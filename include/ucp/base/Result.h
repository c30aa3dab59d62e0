#pragma once
// Result<T, E>: the value of an operation or the error that says why it failed. UCP reports
// every failure this one way — no exceptions across its API, no empty-string successes:
//
//   Result<size_t>               I/O: the error is a std::error_code (errno, timed_out...),
//                                tested as `n.error() == std::errc::timed_out`
//   Result<void, Error>          set-up a person reads about (start a server, load a config):
//                                Error carries one line saying what failed and what to do,
//                                and the std::error_code it came from when there is one
//
// Mirrors the part of std::expected<T, E> UCP uses (has_value, *, ->, error(), value_or), with
// one difference: when T is itself a pointer-like owner (std::unique_ptr, ClientConnection),
// -> reaches the object it owns, so a factory's result is used as the object:
//
//   auto conn = co_await TcpClient::connect(loop, "10.0.0.7", 9000);   // Result<ClientConnection>
//   if (!conn) co_return;
//   co_await conn->write_all(request);     // not (*conn)->write_all(...)
//   ClientConnection owner = std::move(*conn);                     // * is still the owner

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace ucp {

/// A failure a person reads: one line (no trailing newline) saying what went wrong and what
/// to do about it, and the error code behind it when there is one.
struct Error {
  std::string message;
  std::error_code code;

  Error() = default;
  explicit Error(std::string what, std::error_code why = {})
      : message(std::move(what)), code(why) {}
};

/// Wraps an error for construction of a Result, like std::unexpected.
template <class E = std::error_code>
struct Unexpected {
  E error;
  explicit Unexpected(E e) : error(std::move(e)) {}
};

template <>
struct Unexpected<std::error_code> {
  std::error_code error;
  explicit Unexpected(std::error_code e) noexcept : error(e) {}
  explicit Unexpected(std::errc e) noexcept : error(std::make_error_code(e)) {}
};

Unexpected(std::errc) -> Unexpected<std::error_code>;

namespace detail {
/// A type whose operator-> C++ applies again (std::unique_ptr, std::shared_ptr, ...).
template <class T>
concept PointerLike = requires(const T& owner) { owner.operator->(); };
}  // namespace detail

template <class T, class E = std::error_code>
class [[nodiscard]] Result {
 public:
  Result(T value) noexcept(std::is_nothrow_move_constructible_v<T>)  // NOLINT: implicit by design
      : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Unexpected<E> u) noexcept(std::is_nothrow_move_constructible_v<E>)  // NOLINT
      : state_(std::in_place_index<1>, std::move(u.error)) {}

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & noexcept { return std::get<0>(state_); }
  const T& value() const& noexcept { return std::get<0>(state_); }
  T&& value() && noexcept { return std::get<0>(std::move(state_)); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T&& operator*() && noexcept { return std::move(*this).value(); }
  /// The value's members; for a pointer-like T, the members of what it points to (C++ applies
  /// the owner's own operator-> next).
  decltype(auto) operator->() noexcept {
    if constexpr (detail::PointerLike<T>) {
      return (value());
    } else {
      return &value();
    }
  }
  decltype(auto) operator->() const noexcept {
    if constexpr (detail::PointerLike<T>) {
      return (value());
    } else {
      return &value();
    }
  }
  /// The error; E{} when there is a value.
  E error() const {
    if (has_value()) return E{};
    return std::get<1>(state_);
  }
  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, E> state_;
};

template <class E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() noexcept = default;
  Result(Unexpected<E> u) noexcept(std::is_nothrow_move_constructible_v<E>)  // NOLINT
      : error_(std::move(u.error)), failed_(true) {}

  bool has_value() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return has_value(); }
  const E& error() const noexcept { return error_; }

 private:
  E error_{};
  bool failed_ = false;
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
