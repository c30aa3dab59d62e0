// hook<&Owner::f>: a node's callback reaches the member function of the object that holds it,
// through private bases, two nodes of one type told apart by their named subclasses, and a
// callback that skips a level (Via).

#include "ucp/base/Hook.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace ucp {
namespace {

// A node as the loop's nodes are: a callback taking the node, and its arguments.
struct Node {
  using Callback = int (*)(Node&, int32_t, uint32_t) noexcept;
  explicit Node(Callback c) noexcept : callback(c) {}
  int fire(int32_t a, uint32_t b) { return callback(*this, a, b); }
  Callback callback;
};

struct Signal {
  using Callback = void (*)(Signal&) noexcept;
  explicit Signal(Callback c) noexcept : callback(c) {}
  void fire() { callback(*this); }
  Callback callback;
};

class Owner : private Node, private Signal {
 public:
  explicit Owner(int base) noexcept
      : Node(hook<&Owner::on_node>), Signal(hook<&Owner::on_signal>), base_(base) {}
  int fire_node(int32_t a, uint32_t b) { return static_cast<Node&>(*this).fire(a, b); }
  void fire_signal() { static_cast<Signal&>(*this).fire(); }
  int signals() const { return signals_; }

 private:
  friend HookAccess;
  int on_node(int32_t a, uint32_t b) noexcept { return base_ + a + static_cast<int>(b); }
  void on_signal() noexcept { ++signals_; }

  int base_;
  int signals_ = 0;
};

TEST(Hook, CallsTheMemberOfTheObjectHoldingTheNode) {
  Owner first(100);
  Owner second(200);
  EXPECT_EQ(first.fire_node(1, 2), 103);
  EXPECT_EQ(second.fire_node(1, 2), 203);
  first.fire_signal();
  first.fire_signal();
  second.fire_signal();
  EXPECT_EQ(first.signals(), 2);
  EXPECT_EQ(second.signals(), 1);
}

// Two nodes of one type, told apart by a named subclass of each.
struct ReadSignal : Signal {
  using Signal::Signal;
};
struct WriteSignal : Signal {
  using Signal::Signal;
};

struct Duplex : ReadSignal, WriteSignal {
  Duplex() noexcept
      : ReadSignal(hook<&Duplex::readable, ReadSignal>),
        WriteSignal(hook<&Duplex::writable, WriteSignal>) {}
  void readable() noexcept { log += 'r'; }
  void writable() noexcept { log += 'w'; }
  std::string log;
};

TEST(Hook, TellsTwoNodesOfOneTypeApartByTheirNamedBases) {
  Duplex duplex;
  static_cast<WriteSignal&>(duplex).fire();
  static_cast<ReadSignal&>(duplex).fire();
  static_cast<ReadSignal&>(duplex).fire();
  EXPECT_EQ(duplex.log, "wrr");
}

// A node held by a part that the owner holds: the callback goes to the owner (Via the part).
class Part : private Signal {
 public:
  explicit Part(Signal::Callback c) noexcept : Signal(c) {}
  void fire_part() { static_cast<Signal&>(*this).fire(); }

 private:
  friend HookAccess;
};

class Whole : private Part {
 public:
  Whole() noexcept : Part(hook<&Whole::on_part, Part>) {}
  void fire() { fire_part(); }
  int calls = 0;

 private:
  friend HookAccess;
  void on_part() noexcept { ++calls; }
};

TEST(Hook, SkipsALevelThroughVia) {
  Whole whole;
  whole.fire();
  whole.fire();
  EXPECT_EQ(whole.calls, 2);
}

}  // namespace
}  // namespace ucp
