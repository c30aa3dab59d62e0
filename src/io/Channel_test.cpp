// Channel on one loop (order, capacity, close and drain, rendezvous, cancellation) and across
// loops (producers and consumers on different threads, with cancellations racing deliveries:
// nothing lost, nothing duplicated, each producer's order kept).

#include "ucp/io/Channel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"

#include "LoopRunner.h"
#include "LoopThread.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using test::LoopThread;
using test::make_loop;
using test::run_to_end;

Task<> produce(EventLoop& loop, Channel<int>& channel, int count, std::vector<std::string>& log) {
  for (int i = 0; i < count; ++i) {
    auto sent = co_await channel.send(loop, i);
    log.push_back("sent " + std::to_string(i) + (sent ? "" : " failed"));
  }
}

TEST(Channel, DeliversInOrderAndASenderWaitsWhenFull) {
  auto loop = make_loop();
  Channel<int> channel(2);
  std::vector<std::string> log;
  run_to_end(*loop, [](EventLoop& l, Channel<int>& c, std::vector<std::string>& out) -> Task<> {
    l.spawn(produce(l, c, 4, out));
    // Two fit; the third sender waits.
    EXPECT_EQ(out, (std::vector<std::string>{"sent 0", "sent 1"}));
    EXPECT_EQ(c.size(), 2u);
    for (int expected = 0; expected < 4; ++expected) {
      auto item = co_await c.receive(l);
      EXPECT_TRUE(item);
      if (item) {
        EXPECT_EQ(*item, expected);
      }
      out.push_back("got " + std::to_string(expected));
    }
  }(*loop, channel, log));
  // Each receive made room for the waiting sender, whose item joined the queue behind.
  EXPECT_EQ(log.size(), 8u);
  EXPECT_EQ(channel.size(), 0u);
}

TEST(Channel, CloseWakesEveryoneAndReceiversDrainFirst) {
  auto loop = make_loop();
  Channel<int> channel(1);
  std::vector<std::string> log;
  std::vector<std::error_code> receive_errors;
  run_to_end(*loop,
             [](EventLoop& l, Channel<int>& c, std::vector<std::string>& out,
                std::vector<std::error_code>& errors) -> Task<> {
               l.spawn(produce(l, c, 3, out));  // 0 queued, 1 waits (cap 1)
               EXPECT_EQ(out.size(), 1u);
               c.close();  // the waiting sender fails; item 0 stays
               co_await io::sleep_for(l, 1ms);
               EXPECT_TRUE(c.closed());
               for (int i = 0; i < 3; ++i) {
                 auto item = co_await c.receive(l);
                 errors.push_back(item ? std::error_code{} : item.error());
                 if (item) {
                   EXPECT_EQ(*item, 0);
                 }
               }
               auto late = co_await c.send(l, 9);
               EXPECT_EQ(late.error(), ChannelErrc::kClosed);
             }(*loop, channel, log, receive_errors));
  EXPECT_EQ(log, (std::vector<std::string>{"sent 0", "sent 1 failed", "sent 2 failed"}));
  ASSERT_EQ(receive_errors.size(), 3u);
  EXPECT_FALSE(receive_errors[0]);
  EXPECT_EQ(receive_errors[1], ChannelErrc::kClosed);
  EXPECT_EQ(receive_errors[2], ChannelErrc::kClosed);
  EXPECT_EQ(receive_errors[1].message(), "channel closed");
}

TEST(Channel, CloseWakesWaitingReceivers) {
  auto loop = make_loop();
  Channel<std::string> channel(4);
  std::vector<std::error_code> errors(3);
  run_to_end(
      *loop,
      [](EventLoop& l, Channel<std::string>& c, std::vector<std::error_code>& out) -> Task<> {
        for (auto& error : out) {
          l.spawn([](EventLoop& l2, Channel<std::string>& c2, std::error_code& e) -> Task<> {
            e = (co_await c2.receive(l2)).error();
          }(l, c, error));
        }
        co_await io::sleep_for(l, 1ms);
        c.close();
        co_await io::sleep_for(l, 1ms);
      }(*loop, channel, errors));
  for (const auto& error : errors) EXPECT_EQ(error, ChannelErrc::kClosed);
}

TEST(Channel, CapacityZeroIsARendezvous) {
  auto loop = make_loop();
  Channel<int> channel(0);
  std::vector<std::string> log;
  run_to_end(*loop, [](EventLoop& l, Channel<int>& c, std::vector<std::string>& out) -> Task<> {
    int v = 5;
    EXPECT_FALSE(c.try_send(std::move(v)));  // nobody receives
    l.spawn(produce(l, c, 2, out));
    EXPECT_TRUE(out.empty());  // the sender waits for a receiver
    auto first = co_await c.receive(l);
    auto second = co_await c.receive(l);
    EXPECT_EQ(*first, 0);
    EXPECT_EQ(*second, 1);
    co_await io::sleep_for(l, 1ms);
  }(*loop, channel, log));
  EXPECT_EQ(log, (std::vector<std::string>{"sent 0", "sent 1"}));
}

TEST(Channel, TrySendAndTryReceiveNeverWait) {
  Channel<std::unique_ptr<int>> channel(1);
  auto one = std::make_unique<int>(1);
  auto two = std::make_unique<int>(2);
  EXPECT_TRUE(channel.try_send(std::move(one)));
  EXPECT_FALSE(channel.try_send(std::move(two)));  // full: `two` is untouched
  ASSERT_NE(two, nullptr);
  auto got = channel.try_receive();
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(**got, 1);
  EXPECT_FALSE(channel.try_receive());
  channel.close();
  EXPECT_FALSE(channel.try_send(std::move(two)));
  EXPECT_NE(two, nullptr);
}

TEST(Channel, CancelledOperationsTakeAndGiveNothing) {
  auto loop = make_loop();
  Channel<int> channel(1);
  run_to_end(*loop, [](EventLoop& l, Channel<int>& c) -> Task<> {
    auto nothing = co_await with_timeout(c.receive(l), 5ms);
    EXPECT_EQ(nothing.error(), std::errc::timed_out);
    EXPECT_TRUE(co_await c.send(l, 1));
    StopSource stop;
    l.spawn([](EventLoop& l2, StopSource& s) -> Task<> {
      co_await io::sleep_for(l2, 5ms);
      s.request_stop();
    }(l, stop));
    auto blocked = co_await with_stop(c.send(l, 2), stop.token());  // full: waits, then stopped
    EXPECT_EQ(blocked.error(), std::errc::operation_canceled);
    EXPECT_EQ(c.size(), 1u);
    auto item = co_await c.receive(l);
    EXPECT_EQ(*item, 1);
    EXPECT_FALSE(c.try_receive());  // item 2 was not delivered
  }(*loop, channel));
}

TEST(Channel, AReceiverDestroyedWhileWaitingLeavesTheWaitList) {
  Channel<int> channel(4);
  {
    auto loop = make_loop();
    loop->spawn([](EventLoop& l, Channel<int>& c) -> Task<> {
      (void)co_await c.receive(l);
      ADD_FAILURE() << "resumed although its loop was destroyed";
    }(*loop, channel));
  }  // the loop never ran: its frames are destroyed, the waiter leaves the list
  EXPECT_TRUE(channel.try_send(7));
  EXPECT_EQ(channel.try_receive().value_or(0), 7);
}

TEST(Channel, AServedWaiterThatDiesBeforeItsResumptionRunsIsNotResumed) {
  Channel<int> channel(4);
  {
    auto loop = make_loop();
    loop->spawn([](EventLoop& l, Channel<int>& c) -> Task<> {
      (void)co_await c.receive(l);
      ADD_FAILURE() << "resumed although its loop was destroyed";
    }(*loop, channel));
    // From a thread that is not the loop's: the item is handed over and the resumption posted.
    EXPECT_TRUE(channel.try_send(7));
    EXPECT_EQ(channel.size(), 0u);
  }  // the frame dies first, then the loop's queue with the posted resumption in it
}

// ---- across loops ----

struct Item {
  int producer = 0;
  int seq = 0;
};

constexpr int kProducers = 4;
constexpr int kItemsEach = 10000;

/// Sends kItemsEach items; with `timeout` each send is bounded and retried after a timeout (a
/// cancelled send delivers nothing, so the retry cannot duplicate). The last producer closes.
Task<> send_items(EventLoop& loop, Channel<Item>& channel, int producer,
                  std::atomic<int>& producers_left, bool timeout) {
  for (int seq = 0; seq < kItemsEach; ++seq) {
    for (;;) {
      auto sent = timeout ? co_await with_timeout(channel.send(loop, Item{producer, seq}), 100us)
                          : co_await channel.send(loop, Item{producer, seq});
      if (sent) break;
      if (sent.error() != std::errc::timed_out) {
        ADD_FAILURE() << "send failed: " << sent.error().message();
        co_return;
      }
    }
  }
  if (producers_left.fetch_sub(1) == 1) channel.close();
}

Task<> receive_items(EventLoop& loop, Channel<Item>& channel, std::vector<Item>& got,
                     bool timeout) {
  for (;;) {
    auto item = timeout ? co_await with_timeout(channel.receive(loop), 100us)
                        : co_await channel.receive(loop);
    if (item) {
      got.push_back(*item);
      continue;
    }
    if (item.error() == std::errc::timed_out) continue;
    EXPECT_EQ(item.error(), ChannelErrc::kClosed);
    co_return;
  }
}

void run_across_loops(int consumers, bool timeouts, size_t capacity) {
  Channel<Item> channel(capacity);
  std::atomic<int> producers_left{kProducers};
  std::vector<std::vector<Item>> got(static_cast<size_t>(consumers));
  std::vector<std::unique_ptr<LoopThread>> loops;
  for (int c = 0; c < consumers; ++c) {
    auto& thread = loops.emplace_back(std::make_unique<LoopThread>());
    thread->start(receive_items(thread->loop(), channel, got[static_cast<size_t>(c)], timeouts));
  }
  for (int p = 0; p < kProducers; ++p) {
    auto& thread = loops.emplace_back(std::make_unique<LoopThread>());
    thread->start(send_items(thread->loop(), channel, p, producers_left, timeouts));
  }
  const bool finished = test::wait_all_finished(loops, std::chrono::seconds(120));
  if (!finished) channel.close();
  for (auto& thread : loops) thread->stop_and_join();
  ASSERT_TRUE(finished) << "the loops did not finish in time";

  std::vector<std::vector<int>> seen(kProducers, std::vector<int>(kItemsEach, 0));
  size_t total = 0;
  for (const auto& consumer : got) {
    std::vector<int> last(kProducers, -1);
    for (const Item& item : consumer) {
      ASSERT_TRUE(item.producer >= 0 && item.producer < kProducers);
      ASSERT_TRUE(item.seq >= 0 && item.seq < kItemsEach);
      // Each consumer sees each producer's items in the order they were sent.
      EXPECT_GT(item.seq, last[static_cast<size_t>(item.producer)]);
      last[static_cast<size_t>(item.producer)] = item.seq;
      ++seen[static_cast<size_t>(item.producer)][static_cast<size_t>(item.seq)];
      ++total;
    }
  }
  EXPECT_EQ(total, size_t{kProducers} * kItemsEach);
  for (int p = 0; p < kProducers; ++p) {
    for (int s = 0; s < kItemsEach; ++s) {
      ASSERT_EQ(seen[static_cast<size_t>(p)][static_cast<size_t>(s)], 1)
          << "producer " << p << " item " << s;
    }
  }
}

TEST(ChannelAcrossLoops, FourProducersOneConsumerNothingLostNothingDuplicatedInOrder) {
  run_across_loops(/*consumers=*/1, /*timeouts=*/false, /*capacity=*/16);
}

TEST(ChannelAcrossLoops, TwoConsumersAndARendezvous) {
  run_across_loops(/*consumers=*/2, /*timeouts=*/false, /*capacity=*/0);
}

TEST(ChannelAcrossLoops, CancellationsRacingDeliveriesLoseAndDuplicateNothing) {
  run_across_loops(/*consumers=*/2, /*timeouts=*/true, /*capacity=*/4);
}

}  // namespace
}  // namespace ucp
