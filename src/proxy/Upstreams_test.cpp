// Upstreams: the control thread and the workers' copies. Host names resolved off the workers and
// again when they change, active health checks (tcp and http) taking a server out and bringing
// it back with one log line each, a passive ejection on one worker reaching the others, a
// reconfiguration that keeps what stays, and the stats summed over the workers.

#include "ucp/proxy/Upstreams.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/net/Resolver.h"
#include "ucp/net/Socket.h"

#include "LoopRunner.h"
#include "LoopbackClient.h"

namespace ucp::proxy {
namespace {

using namespace std::chrono_literals;

/// A worker loop on its own thread; call() runs a function there and waits for its value.
class Worker {
 public:
  Worker() : loop_(test::make_loop()) {
    thread_ = std::thread([this] { loop_->run(); });
  }
  ~Worker() {
    loop_->stop();
    thread_.join();
  }
  EventLoop& loop() { return *loop_; }
  template <class F>
  auto call(F f) -> decltype(f()) {
    auto done = std::make_shared<std::promise<decltype(f())>>();
    auto value = done->get_future();
    loop_->post([f, done]() mutable { done->set_value(f()); });
    EXPECT_EQ(value.wait_for(10s), std::future_status::ready);
    return value.get();
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

/// Polls `condition` until it holds (bounded).
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

/// A free loopback port (bound and released: nothing listens there until listen_at()).
uint16_t free_port() {
  auto probe = listen_on(*InetAddress::parse("127.0.0.1", 0), {});
  return InetAddress::local_of(probe->get())->port();
}

UniqueFd listen_at(uint16_t port) {
  auto socket = listen_on(*InetAddress::parse("127.0.0.1", port), {});
  EXPECT_TRUE(socket) << "port " << port;
  return socket ? std::move(*socket) : UniqueFd();
}

UpstreamGroupOptions group_of(std::string name, std::vector<ServerSpec> servers) {
  UpstreamGroupOptions group;
  group.name = std::move(name);
  group.servers = std::move(servers);
  return group;
}

/// The names of the servers `worker` may pick now in group `name`.
std::vector<std::string> available(Worker& worker, Upstreams& upstreams, const std::string& name) {
  return worker.call([&] {
    std::vector<std::string> names;
    GroupRef group = upstreams.on(worker.loop())->find(name);
    if (!group) return names;
    for (size_t i = 0; i < group->size(); ++i) {
      if (group->available(i, Clock::now())) names.push_back(group->peer(i).name());
    }
    return names;
  });
}

TEST(Upstreams, NumericServersAreThereBeforeTheControlThreadRuns) {
  Worker worker;
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&worker.loop()},
                              {group_of("app", {{"127.0.0.1", 1001, 1}, {"127.0.0.2", 1002, 2}})}));
  EXPECT_EQ(available(worker, upstreams, "app"),
            (std::vector<std::string>{"127.0.0.1:1001", "127.0.0.2:1002"}));
  EXPECT_EQ(available(worker, upstreams, "other"), std::vector<std::string>{});
  EXPECT_EQ(upstreams.on(*test::make_loop()), nullptr);  // not one of the workers
}

TEST(Upstreams, HostNamesResolveOnTheControlThreadAndAgainWhenTheyChange) {
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> dns = {{"app.test", {"127.0.0.7"}}};
  std::atomic<int> lookups{0};
  ResolverOptions resolver_options;
  resolver_options.threads = 1;
  resolver_options.lookup = [&](const std::string& host, uint16_t port, int,
                                std::vector<InetAddress>& out) {
    lookups.fetch_add(1);
    std::lock_guard lock(mutex);
    auto found = dns.find(host);
    if (found == dns.end()) return EAI_NONAME;
    for (const auto& ip : found->second) out.push_back(*InetAddress::parse(ip, port));
    return 0;
  };
  Resolver resolver(resolver_options);
  Worker worker;
  Upstreams upstreams({.backend = test::backend_under_test(), .resolver = &resolver});
  auto group = group_of("app", {{"app.test", 8080, 1}, {"gone.test", 8080, 1}});
  group.resolve_interval_ms = 50;
  ASSERT_TRUE(upstreams.start({&worker.loop()}, {group}));
  EXPECT_TRUE(eventually([&] {
    return available(worker, upstreams, "app") ==
           std::vector<std::string>{"app.test:8080 (127.0.0.7:8080)"};
  }));
  {
    std::lock_guard lock(mutex);
    dns["app.test"] = {"127.0.0.8", "127.0.0.9"};
  }
  EXPECT_TRUE(eventually([&] { return available(worker, upstreams, "app").size() == 2; }));
  // A failing lookup keeps the addresses the name had.
  {
    std::lock_guard lock(mutex);
    dns.erase("app.test");
  }
  const int before = lookups.load();
  EXPECT_TRUE(eventually([&] { return lookups.load() >= before + 4; }));
  EXPECT_EQ(available(worker, upstreams, "app").size(), 2u);
  upstreams.stop();
}

TEST(Upstreams, TcpHealthChecksTakeAServerOutAndBringItBack) {
  Worker worker;
  UniqueFd up = listen_at(0);
  const uint16_t up_port = InetAddress::local_of(up.get())->port();
  const uint16_t down_port = free_port();
  auto group = group_of("app", {{"127.0.0.1", up_port, 1}, {"127.0.0.1", down_port, 1}});
  group.health.kind = HealthCheckKind::kTcp;
  group.health.interval_ms = 50;
  group.health.rise = 2;
  group.health.fall = 2;
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&worker.loop()}, {group}));
  const std::string up_name = "127.0.0.1:" + std::to_string(up_port);
  const std::string down_name = "127.0.0.1:" + std::to_string(down_port);
  EXPECT_TRUE(eventually(
      [&] { return available(worker, upstreams, "app") == std::vector<std::string>{up_name}; }));
  UniqueFd back = listen_at(down_port);  // the server comes back
  EXPECT_TRUE(eventually([&] { return available(worker, upstreams, "app").size() == 2; }));
  upstreams.stop();
}

/// Answers every connection with `status` (an HTTP/1.1 status line and an empty body).
class TinyHttpServer {
 public:
  TinyHttpServer() : listener_(listen_at(0)) {
    port_ = InetAddress::local_of(listener_.get())->port();
    thread_ = std::thread([this] { serve(); });
  }
  ~TinyHttpServer() {
    stop_.store(true);
    thread_.join();
  }
  uint16_t port() const { return port_; }
  void set_status(int status) { status_.store(status); }
  std::string last_request() {
    std::lock_guard lock(mutex_);
    return last_request_;
  }

 private:
  void serve() {
    while (!stop_.load()) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!client) continue;
      std::string request;
      char buffer[1024];
      while (request.find("\r\n\r\n") == std::string::npos) {
        auto n = test::recv_some(client.get(), buffer, 1000);
        if (!n || *n == 0) break;
        request.append(buffer, *n);
      }
      {
        std::lock_guard lock(mutex_);
        last_request_ = request;
      }
      const std::string reply = "HTTP/1.1 " + std::to_string(status_.load()) +
                                " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)test::send_text(client.get(), reply, 1000);
    }
  }

  UniqueFd listener_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> status_{200};
  std::mutex mutex_;
  std::string last_request_;
};

TEST(Upstreams, HttpHealthChecksWantA2xxStatus) {
  TinyHttpServer server;
  Worker worker;
  auto group = group_of("web", {{"127.0.0.1", server.port(), 1}});
  ASSERT_TRUE(parse_health_check("http:/healthz", group.health));
  group.health.interval_ms = 50;
  group.health.fall = 1;
  group.health.rise = 1;
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&worker.loop()}, {group}));
  EXPECT_TRUE(eventually([&] { return !server.last_request().empty(); }));
  const std::string request = server.last_request();
  EXPECT_EQ(request.rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"),
            std::string::npos)
      << request;
  EXPECT_EQ(available(worker, upstreams, "web").size(), 1u);
  server.set_status(503);
  EXPECT_TRUE(eventually([&] { return available(worker, upstreams, "web").empty(); }));
  server.set_status(204);
  EXPECT_TRUE(eventually([&] { return available(worker, upstreams, "web").size() == 1; }));
  upstreams.stop();
}

TEST(Upstreams, AnEjectionOnOneWorkerReachesTheOthers) {
  Worker first, second;
  auto group = group_of("app", {{"127.0.0.1", 1001, 1}, {"127.0.0.1", 1002, 1}});
  group.max_fails = 2;
  group.fail_timeout_ms = 60000;
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&first.loop(), &second.loop()}, {group}));
  first.call([&] {
    GroupRef g = upstreams.on(first.loop())->find("app");
    for (int i = 0; i < 2; ++i) g->report_failure(const_cast<PeerState&>(g->peer(0)), Clock::now());
    return 0;
  });
  EXPECT_EQ(available(first, upstreams, "app"), std::vector<std::string>{"127.0.0.1:1002"});
  EXPECT_TRUE(eventually([&] {
    return available(second, upstreams, "app") == std::vector<std::string>{"127.0.0.1:1002"};
  }));
  // A success on the first worker clears the ejection for everyone.
  first.call([&] {
    GroupRef g = upstreams.on(first.loop())->find("app");
    g->report_success(const_cast<PeerState&>(g->peer(0)), 1ms);
    return 0;
  });
  EXPECT_TRUE(eventually([&] { return available(second, upstreams, "app").size() == 2; }));
  EXPECT_EQ(available(first, upstreams, "app").size(), 2u);
  upstreams.stop();
}

TEST(Upstreams, ReconfigureReplacesTheSetAndKeepsWhatStays) {
  Worker worker;
  auto kept = group_of("kept", {{"127.0.0.1", 1001, 1}});
  auto changed = group_of("changed", {{"127.0.0.1", 2001, 1}, {"127.0.0.1", 2002, 1}});
  changed.max_fails = 1;
  auto removed = group_of("removed", {{"127.0.0.1", 3001, 1}});
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&worker.loop()}, {kept, changed, removed}));
  // An established "connection" to the group that will be removed, and an ejection in the
  // group that will change.
  auto held = std::make_shared<PeerLease>();
  worker.call([&] {
    GroupRef r = upstreams.on(worker.loop())->find("removed");
    *held = r->pick(InetAddress{}, {}, Clock::now());
    GroupRef c = upstreams.on(worker.loop())->find("changed");
    c->report_failure(const_cast<PeerState&>(c->peer(0)), Clock::now());
    return 0;
  });
  EXPECT_TRUE(eventually([&] { return available(worker, upstreams, "changed").size() == 1; }));

  // An invalid set changes nothing.
  auto bad = changed;
  bad.servers.clear();
  EXPECT_FALSE(upstreams.reconfigure({kept, bad}));

  const uint64_t before = upstreams.publications();
  changed.servers.push_back({"127.0.0.1", 2003, 1});
  auto added = group_of("added", {{"127.0.0.1", 4001, 1}});
  ASSERT_TRUE(upstreams.reconfigure({kept, changed, added}));
  EXPECT_TRUE(eventually([&] { return upstreams.publications() > before; }));
  EXPECT_TRUE(eventually([&] { return !available(worker, upstreams, "added").empty(); }));
  EXPECT_TRUE(available(worker, upstreams, "removed").empty());
  // The ejected address stays ejected in the changed group; the new server is there.
  EXPECT_EQ(available(worker, upstreams, "changed"),
            (std::vector<std::string>{"127.0.0.1:2002", "127.0.0.1:2003"}));
  // The connection to the removed group ends after the change: its state is still there.
  worker.call([&] {
    EXPECT_EQ((*held)->active, 1u);
    held->reset();
    return 0;
  });
  upstreams.stop();
}

TEST(Upstreams, StatsSumTheWorkers) {
  Worker first, second;
  auto group = group_of("app", {{"127.0.0.1", 1001, 1}});
  Upstreams upstreams({.backend = test::backend_under_test()});
  ASSERT_TRUE(upstreams.start({&first.loop(), &second.loop()}, {group}));
  auto held = std::make_shared<std::vector<PeerLease>>();
  for (Worker* w : {&first, &second}) {
    w->call([&, w] {
      GroupRef g = upstreams.on(w->loop())->find("app");
      held->push_back(g->pick(InetAddress{}, {}, Clock::now()));
      g->report_success(*held->back(), 3ms);
      return 0;
    });
  }
  Worker home;
  auto stats = home.call([&] {
    auto out = std::make_shared<std::promise<std::vector<GroupStats>>>();
    home.loop().spawn([](Upstreams& u, EventLoop& loop, auto promise) -> Task<> {
      promise->set_value(co_await u.collect_stats(loop));
    }(upstreams, home.loop(), out));
    return out;
  });
  auto future = stats->get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto groups = future.get();
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].peers.size(), 1u);
  EXPECT_EQ(groups[0].peers[0].active, 2u);
  EXPECT_EQ(groups[0].peers[0].connects, 2u);
  EXPECT_EQ(groups[0].peers[0].connect_time_us, 6000u);
  EXPECT_FALSE(groups[0].peers[0].down);
  first.call([&] {
    held->at(0).reset();
    return 0;
  });
  second.call([&] {
    held->at(1).reset();
    return 0;
  });
  upstreams.stop();
}

}  // namespace
}  // namespace ucp::proxy
