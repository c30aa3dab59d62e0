// Memory an idle relayed connection pair keeps in the gateway worker's pool: N clients make one
// round trip through an L4Gateway and stay open, and the worker's MemoryPool grows by at most a
// budget per pair. The two connections, the handler's, the relay's and its two directions'
// coroutine frames all live in that pool, so a frame that grows past its size class shows here
// first. Release builds only: sanitizers enlarge every frame.

#include <algorithm>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "ucp/memory/MemoryPool.h"
#include "ucp/proxy/L4Gateway.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopbackClient.h"

namespace ucp::proxy {
namespace {

// Pool bytes per idle relayed pair: the client connection in TcpServer's frame (768), the
// upstream connection (768), TcpProxy::serve's frame (384), relay()'s (512) and its two
// directions' (256 each). Measured: 2,944 (see the test output).
constexpr size_t kRelayedPairBudget = 3072;

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

Task<> echo(TcpConnection& connection) {
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;
    if (!co_await connection.write_all(data->bytes())) co_return;
  }
}

size_t pool_bytes_on(EventLoop& loop) {
  auto done = std::make_shared<std::promise<size_t>>();
  auto value = done->get_future();
  loop.post([done] { done->set_value(MemoryPool::thread_stats().bytes_in_use); });
  return value.wait_for(std::chrono::seconds(10)) == std::future_status::ready ? value.get() : 0;
}

TEST(RelayMemory, IdleRelayedPairStaysWithinItsBudget) {
  if (sanitized()) GTEST_SKIP() << "release builds only: sanitizers enlarge coroutine frames";
  UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  const size_t count = std::min<size_t>(1000, (limit.rlim_cur - 256) / 4);
  ASSERT_GE(count, 200u);

  ServerOptions upstream_options;
  upstream_options.ip = "127.0.0.1";
  upstream_options.port = 0;
  upstream_options.read_timeout_ms = 0;
  LoopOptions loop;
  loop.backend = test::backend_under_test();
  loop.provided_buffers_count = 256;
  TcpServer upstream(upstream_options, loop, &echo);
  ASSERT_EQ(test::error_text(upstream.start()), "");
  std::thread upstream_thread([&] { upstream.run(); });

  L4GatewayOptions options;
  options.server.ip = "127.0.0.1";
  options.server.port = 0;
  options.server.thread_num = 1;
  options.loop.backend = test::backend_under_test();
  options.proxy.upstream = "app";
  UpstreamGroupOptions group;
  group.name = "app";
  group.servers = {{"127.0.0.1", upstream.local_address().port(), 1}};
  options.upstreams = {group};
  L4Gateway gateway(options);
  ASSERT_EQ(test::error_text(gateway.start()), "");
  std::thread gateway_thread([&] { gateway.run(); });
  EventLoop& worker = *gateway.server().worker_loops().front();

  const std::string message(64, 'x');
  std::string scratch(message.size(), '\0');
  std::vector<UniqueFd> idle;
  {  // one pair first: what every connection shares (group state, buffers) is set up
    auto warm = test::connect_loopback(gateway.local_address().port());
    ASSERT_TRUE(warm && test::echo_round_trip(warm->get(), message, scratch));
    idle.push_back(std::move(*warm));
  }
  const size_t before = pool_bytes_on(worker);
  for (size_t i = 0; i < count; ++i) {
    auto connection = test::connect_loopback(gateway.local_address().port());
    ASSERT_TRUE(connection) << "connection " << i;
    ASSERT_TRUE(test::echo_round_trip(connection->get(), message, scratch)) << "connection " << i;
    idle.push_back(std::move(*connection));
  }
  const size_t after = pool_bytes_on(worker);
  const size_t per_pair = (after - std::min(after, before)) / count;
  std::printf("idle relayed pair: %zu pool bytes on the gateway's worker (%zu pairs)\n", per_pair,
              count);
  EXPECT_LE(per_pair, kRelayedPairBudget);
  idle.clear();
  gateway.stop();
  gateway_thread.join();
  upstream.stop();
  upstream_thread.join();
}

}  // namespace
}  // namespace ucp::proxy
