#pragma once
// Intrusive hooks: how a node that something else keeps or calls (a loop's timer, a pre-submit
// hook, an operation's completion context, a connection's reader and writer) calls back the
// object that holds it. One idiom for all of them:
//
//   class Session : private ucp::TimerNode {
//    public:
//     explicit Session(ucp::EventLoop& loop) : TimerNode(ucp::hook<&Session::on_idle>) {}
//    private:
//     friend ucp::HookAccess;     // the node is a private base: lets the hook reach the owner
//     void on_idle() noexcept;     // an ordinary member function
//   };
//
// The node is a base class of its owner, and its callback, a plain function pointer
// `R (*)(Node&, Args...) noexcept`, is made from a member function `R (Owner::*)(Args...)
// noexcept` by `hook<&Owner::f>`. The callback finds the owner from the node with static_cast:
// container_of done by the type system. The compiler knows the offset and checks that the node
// is an unambiguous base of the owner, so the node carries no pointer to its owner (no bytes per
// connection), and no one writes a trampoline, a cast or a `void*`.
//
// An owner holding the node through an intermediate class names it: `hook<&Owner::f, Via>`
// casts the node to Via, then Via to Owner. That is how an owner tells apart two nodes of one
// type (a named subclass of each) and how a callback skips a level (a reader's receive stream
// calling the connection that holds the reader).
//
// Thread contract: none of its own (the node's).

#include <type_traits>
#include <utility>

namespace ucp {

/// Does the casts of hook<>: an owner that holds its node as a private or protected base
/// befriends it (`friend ucp::HookAccess;`), and so does each Via on the way.
struct HookAccess {
  template <class Owner, class Via, class Node>
  static Owner& owner_of(Node& node) noexcept {
    if constexpr (std::is_same_v<Via, Node>) {
      return static_cast<Owner&>(node);
    } else {
      return static_cast<Owner&>(static_cast<Via&>(node));
    }
  }
};

namespace detail {

template <class Method>
struct MemberFunctionOf;
template <class Owner, class R, class... Args>
struct MemberFunctionOf<R (Owner::*)(Args...) noexcept> {
  using OwnerType = Owner;
};

template <auto Method, class Via, class Node, class R, class... Args>
R call_hook(Node& node, Args... args) noexcept {
  using Owner = typename MemberFunctionOf<decltype(Method)>::OwnerType;
  using Step = std::conditional_t<std::is_void_v<Via>, Node, Via>;
  return (HookAccess::owner_of<Owner, Step>(node).*Method)(std::forward<Args>(args)...);
}

/// Converts to the callback type of whichever node it is given to.
template <auto Method, class Via>
struct HookCallback {
  template <class Node, class R, class... Args>
  using Callback = R (*)(Node&, Args...) noexcept;

  template <class Node, class R, class... Args>
  constexpr operator Callback<Node, R, Args...>() const noexcept {  // NOLINT: by design
    return &call_hook<Method, Via, Node, R, Args...>;
  }
};

}  // namespace detail

/// The callback of a node held as a base by the owner of `Method` (see above).
template <auto Method, class Via = void>
inline constexpr detail::HookCallback<Method, Via> hook{};

}  // namespace ucp
