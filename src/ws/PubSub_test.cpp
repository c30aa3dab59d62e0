// PubSub over loopback: an HttpServer with two worker loops whose WebSocket route subscribes
// each connection to the topic in its path; raw clients on the test thread read what arrives.
// Fan-out across both workers from a thread that is no loop and from a loop, a subscriber that
// leaves, the slow-consumer policies (close with 1013, drop) with their memory bound, and a loop
// that falls behind its publishers.

#include "ucp/ws/PubSub.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/http/HttpServer.h"
#include "ucp/ws/Accept.h"

#include "Backends.h"
#include "ErrorText.h"
#include "WsRawClient.h"

namespace ucp::ws {
namespace {

using namespace std::chrono_literals;
using test::WsRawClient;

/// Two worker loops; GET /sub/{topic} subscribes the connection to {topic}, says "ready", and
/// publishes every text it receives after "pub:" to the same topic (from its loop).
class Hub {
 public:
  explicit Hub(PubSubOptions options = {}, uint64_t max_output_bytes = 4 << 20) : pubsub_(options) {
    ServerOptions server;
    server.ip = "127.0.0.1";
    server.port = 0;
    server.thread_num = 2;
    server.shutdown_timeout_ms = 2000;
    server.max_output_bytes = max_output_bytes;
    LoopOptions loop;
    loop.backend = test::backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    server_ = std::make_unique<http::HttpServer>(server, loop, http::HttpOptions{});
    server_->router().get("/sub/{topic}",
                          [this](http::Request& req, http::Response& res) -> Task<> {
                            accept(req, res, ws_options_,
                                   [this, topic = std::string(req.param("topic"))](WebSocket& ws) {
                                     return subscriber(ws, topic);
                                   });
                            co_return;
                          });
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~Hub() {
    server_->stop();
    thread_.join();
  }

  PubSub& pubsub() { return pubsub_; }
  http::HttpServer& server() { return *server_; }
  uint16_t port() const { return server_->local_address().port(); }
  size_t loops_with_subscribers() {
    std::lock_guard lock(mutex_);
    return loops_.size();
  }
  /// A client subscribed to `topic` (it has read "ready").
  WsRawClient join(const std::string& topic, int receive_buffer = 0) {
    auto ws = WsRawClient::open(port(), "/sub/" + topic, "", true,
                                "dGhlIHNhbXBsZSBub25jZQ==", receive_buffer);
    EXPECT_TRUE(ws) << ws.error().message();
    if (!ws) std::abort();
    auto ready = ws->read_frame();
    EXPECT_TRUE(ready && ready->payload == "ready");
    return std::move(*ws);
  }
  /// Waits (bounded) until `predicate(stats)` holds.
  template <class Predicate>
  bool wait_for(Predicate predicate, std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!predicate(pubsub_.stats())) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }

 private:
  Task<> subscriber(WebSocket& ws, std::string topic) {
    auto subscription = pubsub_.subscribe(ws, topic);
    {
      std::lock_guard lock(mutex_);
      loops_.insert(&ws.loop());
    }
    (void)co_await ws.send_text("ready");
    while (auto message = co_await ws.receive()) {
      const std::string_view text = message->text();
      if (text.substr(0, 4) == "pub:") pubsub_.publish(topic, text.substr(4));
    }
  }

  PubSub pubsub_;  // declared first: it outlives the server
  Options ws_options_;
  std::mutex mutex_;
  std::set<EventLoop*> loops_;
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
};

/// The next text frame's payload, or why there is none.
std::string next_text(WsRawClient& ws, int64_t timeout_ms = 10000) {
  auto frame = ws.read_frame(timeout_ms);
  if (!frame) return "error: " + frame.error().message();
  if (frame->opcode != 0x1) return "opcode " + std::to_string(frame->opcode);
  return frame->payload;
}

TEST(PubSub, FansOutToSubscribersOnBothWorkersInOrder) {
  Hub hub;
  std::vector<WsRawClient> news;
  for (int i = 0; i < 6; ++i) news.push_back(hub.join("news"));
  std::vector<WsRawClient> sport;
  for (int i = 0; i < 2; ++i) sport.push_back(hub.join("sport"));
  EXPECT_EQ(hub.loops_with_subscribers(), 2u) << "connections go round-robin to both workers";
  EXPECT_EQ(hub.pubsub().stats().subscribers, 8u);

  for (int n = 0; n < 50; ++n) EXPECT_TRUE(hub.pubsub().publish("news", std::to_string(n)));
  EXPECT_TRUE(hub.pubsub().publish("sport", "goal"));
  for (auto& ws : news) {
    for (int n = 0; n < 50; ++n) ASSERT_EQ(next_text(ws), std::to_string(n));
  }
  for (auto& ws : sport) EXPECT_EQ(next_text(ws), "goal") << "no news for sport subscribers";

  // Published from a worker loop: every news subscriber, on both workers, gets it.
  ASSERT_TRUE(news[1].send(test::ws_frame(0x81, "pub:from a loop")));
  for (auto& ws : news) EXPECT_EQ(next_text(ws), "from a loop");
  EXPECT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.delivered == 6 * 51 + 2; }));
  EXPECT_EQ(hub.pubsub().stats().published, 52u);
}

TEST(PubSub, ASubscriberThatLeavesStopsReceiving) {
  Hub hub;
  std::vector<WsRawClient> members;
  for (int i = 0; i < 4; ++i) members.push_back(hub.join("room"));
  auto closing = members[0].close_handshake(close_code::kNormal);
  ASSERT_TRUE(closing) << closing.error().message();
  members[0].close();
  members[3].close();  // just gone: no close frame
  ASSERT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.subscribers == 2; }));
  for (int n = 0; n < 20; ++n) hub.pubsub().publish("room", "after " + std::to_string(n));
  for (int i : {1, 2}) {
    for (int n = 0; n < 20; ++n) ASSERT_EQ(next_text(members[i]), "after " + std::to_string(n));
  }
  // A topic nobody is subscribed to any more costs nothing and reaches nobody.
  members.clear();
  ASSERT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.subscribers == 0; }));
  const uint64_t delivered = hub.pubsub().stats().delivered;
  hub.pubsub().publish("room", "nobody");
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(hub.pubsub().stats().delivered, delivered);
}

// A peer that reads nothing fills its connection's output queue, then its queue here; then it
// is closed with 1013 while a reading subscriber of the same topic gets every message.
TEST(PubSub, ClosesASlowConsumerWith1013) {
  PubSubOptions options;
  options.max_queued_messages = 8;
  Hub hub(options, 16 * 1024);
  WsRawClient slow = hub.join("feed", 4096);
  WsRawClient reader = hub.join("feed");
  const std::string payload(4096, 'x');
  std::atomic<int> read{0};
  std::promise<int> read_all;
  std::thread reading([&] {
    for (;;) {
      auto frame = reader.read_frame();
      if (!frame || frame->opcode != 0x1) break;
      if (frame->payload == "end") break;
      read.fetch_add(1);
    }
    read_all.set_value(read.load());
  });
  int published = 0;
  for (; published < 20000 && hub.pubsub().stats().closed == 0; ++published) {
    // The reader stays at most a few messages behind, however the threads are scheduled.
    for (int i = 0; i < 10000 && published - read.load() > 4; ++i) {
      std::this_thread::sleep_for(100us);
    }
    hub.pubsub().publish("feed", payload);
  }
  EXPECT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.closed == 1; }));
  hub.pubsub().publish("feed", "end");
  auto got = read_all.get_future();
  ASSERT_EQ(got.wait_for(30s), std::future_status::ready);
  reading.join();
  EXPECT_EQ(got.get(), published) << "the reading subscriber lost messages";
  auto close = slow.read_close(20000);  // drains what was queued before the close frame
  ASSERT_TRUE(close) << close.error().message();
  EXPECT_EQ(close->close_code(), close_code::kTryAgainLater);
  slow.close();  // the end of the connection answers it
  EXPECT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.subscribers == 1; }));
}

// kDrop: the slow peer keeps its connection and loses what it had no room for; what waits for
// it never passes the bound.
TEST(PubSub, DropsForASlowConsumerWithinItsBound) {
  PubSubOptions options;
  options.max_queued_messages = 16;
  options.slow_consumer = SlowConsumer::kDrop;
  Hub hub(options, 16 * 1024);
  WsRawClient slow = hub.join("feed", 4096);
  const std::string payload(2048, 'y');
  uint64_t most_queued = 0;
  for (int n = 0; n < 3000; ++n) {
    hub.pubsub().publish("feed", payload);
    most_queued = std::max(most_queued, hub.pubsub().stats().queued);
  }
  ASSERT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.dropped > 0; }));
  EXPECT_LE(most_queued, 16u);
  EXPECT_EQ(hub.pubsub().stats().closed, 0u);
  // The peer reads at last: whole messages, as many as were not dropped.
  int received = 0;
  for (;;) {
    auto frame = slow.read_frame(500);
    if (!frame) break;  // nothing more for half a second: all that was kept is here
    ASSERT_EQ(frame->opcode, 0x1);
    ASSERT_EQ(frame->payload, payload);
    ++received;
  }
  ASSERT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.queued == 0; }));
  EXPECT_GT(received, 0);
  EXPECT_EQ(static_cast<uint64_t>(received) + hub.pubsub().stats().dropped, 3000u);
  hub.pubsub().publish("feed", "still here");
  EXPECT_EQ(next_text(slow), "still here") << "the connection stayed open";
}

// A loop that does not run takes at most max_backlog messages; publish() says so for the rest,
// and once the loop runs again its subscribers get the ones it took, in order.
TEST(PubSub, ALoopBehindItsPublishersGetsNoMore) {
  PubSubOptions options;
  options.max_backlog = 4;
  Hub hub(options);
  std::vector<WsRawClient> clients;
  clients.push_back(hub.join("t"));
  clients.push_back(hub.join("t"));
  ASSERT_EQ(hub.loops_with_subscribers(), 2u);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (EventLoop* worker : hub.server().tcp().worker_loops()) {
    worker->post([released] { released.wait(); });  // the worker stops running
  }
  int accepted = 0;
  for (int n = 0; n < 10; ++n) accepted += hub.pubsub().publish("t", std::to_string(n)) ? 1 : 0;
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(hub.pubsub().stats().backlogged, 2u * 6);
  release.set_value();
  ASSERT_TRUE(hub.wait_for([](const PubSubStats& s) { return s.delivered == 2 * 4; }));
  EXPECT_TRUE(hub.pubsub().publish("t", "caught up"));
  for (auto& ws : clients) {
    for (int n = 0; n < 4; ++n) EXPECT_EQ(next_text(ws), std::to_string(n));
    EXPECT_EQ(next_text(ws), "caught up");
  }
}

// Publishers on several threads at once (publish() posts after it lets go of its lock): every
// subscriber, on both workers, gets every message, and each publisher's in the order it
// published them.
TEST(PubSub, ConcurrentPublishersEachKeepTheirOrderOnEveryLoop) {
  Hub hub;
  std::vector<WsRawClient> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(hub.join("t"));
  ASSERT_EQ(hub.loops_with_subscribers(), 2u);
  constexpr int kPublishers = 3;
  constexpr int kEach = 200;
  std::atomic<int> refused{0};
  std::vector<std::thread> publishers;
  for (int p = 0; p < kPublishers; ++p) {
    publishers.emplace_back([&hub, &refused, p] {
      for (int n = 0; n < kEach; ++n) {
        if (!hub.pubsub().publish("t", std::to_string(p) + ":" + std::to_string(n))) ++refused;
      }
    });
  }
  for (auto& thread : publishers) thread.join();
  EXPECT_EQ(refused.load(), 0);
  for (auto& ws : clients) {
    std::vector<int> next(kPublishers, 0);
    for (int i = 0; i < kPublishers * kEach; ++i) {
      const std::string text = next_text(ws);
      const size_t colon = text.find(':');
      ASSERT_NE(colon, std::string::npos) << text;
      const int p = std::stoi(text.substr(0, colon));
      ASSERT_TRUE(p >= 0 && p < kPublishers) << text;
      ASSERT_EQ(std::stoi(text.substr(colon + 1)), next[p]) << "publisher " << p << "'s order";
      ++next[p];
    }
  }
  EXPECT_TRUE(
      hub.wait_for([](const PubSubStats& s) { return s.delivered == 4u * kPublishers * kEach; }));
  const PubSubStats stats = hub.pubsub().stats();
  EXPECT_EQ(stats.published, uint64_t{kPublishers} * kEach);
  EXPECT_EQ(stats.backlogged, 0u);
}

}  // namespace
}  // namespace ucp::ws
