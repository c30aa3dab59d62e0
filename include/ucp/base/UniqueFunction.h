#pragma once
// UniqueFunction<R(Args...)>: a move-only callable, for tasks posted to another thread
// (std::function demands copyable targets, and std::move_only_function is C++23).
// Small callables (up to kInlineSize bytes) live inside the object: no allocation.

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace ucp {

template <class Signature>
class UniqueFunction;

template <class R, class... Args>
class UniqueFunction<R(Args...)> {
 public:
  static constexpr size_t kInlineSize = 48;

  UniqueFunction() noexcept = default;
  // Only callables of the signature convert (like std::function), so that a wrong one is
  // reported where it is passed, not deep inside this class.
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, UniqueFunction> &&
             std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
  UniqueFunction(F&& f) {  // NOLINT: implicit like std::function
    using Fn = std::decay_t<F>;
    if constexpr (sizeof(Fn) <= kInlineSize && alignof(Fn) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<Fn>) {
      ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
      ops_ = &inline_ops<Fn>;
    } else {
      *reinterpret_cast<Fn**>(storage_) = new Fn(std::forward<F>(f));
      ops_ = &heap_ops<Fn>;
    }
  }
  UniqueFunction(UniqueFunction&& other) noexcept : ops_(std::exchange(other.ops_, nullptr)) {
    if (ops_) ops_->move(other.storage_, storage_);
  }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = std::exchange(other.ops_, nullptr);
      if (ops_) ops_->move(other.storage_, storage_);
    }
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void*) noexcept;
  };
  template <class Fn>
  static constexpr Ops inline_ops{
      [](void* s, Args&&... a) -> R { return (*static_cast<Fn*>(s))(std::forward<Args>(a)...); },
      [](void* from, void* to) noexcept {
        ::new (to) Fn(std::move(*static_cast<Fn*>(from)));
        static_cast<Fn*>(from)->~Fn();
      },
      [](void* s) noexcept { static_cast<Fn*>(s)->~Fn(); }};
  template <class Fn>
  static constexpr Ops heap_ops{
      [](void* s, Args&&... a) -> R { return (**static_cast<Fn**>(s))(std::forward<Args>(a)...); },
      [](void* from, void* to) noexcept { *static_cast<Fn**>(to) = *static_cast<Fn**>(from); },
      [](void* s) noexcept { delete *static_cast<Fn**>(s); }};

  void reset() noexcept {
    if (ops_) std::exchange(ops_, nullptr)->destroy(storage_);
  }

  alignas(std::max_align_t) std::byte storage_[kInlineSize];
  const Ops* ops_ = nullptr;
};

}  // namespace ucp
