// UdpMetrics over loopback, on the backend ctest picks (BOTH_BACKENDS) and on both ways of
// receiving (the loop's receive buffers, or one recvmsg at a time): a socket with metrics
// attached receives, echoes, sends a run of equal datagrams, is refused twice by the kernel,
// hears an ICMP refusal and is closed under a waiting receive; the registry renders exactly
// what it did, and promtool accepts the rendering.

#include "ucp/net/UdpMetrics.h"

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/Operations.h"
#include "ucp/metrics/Registry.h"
#include "ucp/net/UdpSocket.h"

#include "Backends.h"
#include "Promtool.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

// A loop with 2,048-byte receive buffers: a socket whose largest datagram is 1,500 bytes
// receives through them (multishot); one of 4,000 bytes does not fit and receives one recvmsg
// at a time into pool blocks.
std::unique_ptr<EventLoop> make_loop() {
  LoopOptions options;
  options.backend = test::backend_under_test();
  options.provided_buffers_count = 16;
  options.provided_buffer_size = 2048;
  auto loop = EventLoop::create(options);
  EXPECT_TRUE(loop) << loop.error().message();
  return loop ? std::move(*loop) : nullptr;
}

// Runs `body` on `loop` until it finishes (at most 20 s).
bool run(EventLoop& loop, Task<> body) {
  bool finished = false;
  loop.spawn([](EventLoop& l, Task<> inner, bool& done) -> Task<> {
    co_await std::move(inner);
    done = true;
    l.stop();
  }(loop, std::move(body), finished));
  loop.spawn([](EventLoop& l) -> Task<> {
    co_await io::sleep_for(l, 20s);
    l.stop();
  }(loop));
  loop.run();
  return finished;
}

std::span<const std::byte> first(const std::vector<std::byte>& bytes, size_t n) {
  return std::span<const std::byte>(bytes).first(n);
}

// What the counted socket saw that the test cannot know in advance.
struct Observed {
  bool multishot = false;
  size_t kept_of_long = 0;  // bytes of the 9,000-byte datagram the socket kept
  uint64_t segmented = 0;   // the socket's own count of segmented sends
  uint64_t truncated = 0;   // the socket's own count of kernel-cut datagrams
  std::error_code refusal;
  std::error_code after_close;
  size_t echoes = 0;  // datagrams the plain socket got back
};

// The scenario, with `counted` (metrics attached) and a plain peer.
Task<> exercise(EventLoop& l, UdpMetrics& metrics, uint32_t max_datagram, Observed& out) {
  const auto local = *InetAddress::parse("127.0.0.1", 0);
  UdpOptions options;
  options.metrics = &metrics;
  options.max_datagram_bytes = max_datagram;
  auto counted = UdpSocket::bind(l, local, options);
  auto peer = UdpSocket::bind(l, local);
  auto gone = UdpSocket::bind(l, local);
  EXPECT_TRUE(counted && peer && gone);
  if (!counted || !peer || !gone) co_return;
  UdpSocket& c = **counted;
  UdpSocket& p = **peer;
  out.multishot = c.multishot();
  const std::vector<std::byte> payload(70000, std::byte{0x5A});

  // 10 datagrams of 10, 20, ... 100 bytes (550) in; echoed back with one send_batch.
  for (size_t i = 1; i <= 10; ++i)
    (void)co_await p.send_to(first(payload, i * 10), c.local_address());
  std::array<ReceivedDatagram, 10> batch;
  std::array<OutgoingDatagram, 10> replies;
  for (size_t echoed = 0; echoed < 10;) {
    auto n = co_await c.receive_batch(std::span(batch).first(10 - echoed));
    EXPECT_TRUE(n);
    if (!n) co_return;
    for (size_t i = 0; i < *n; ++i) {
      replies[i] = OutgoingDatagram(batch[i].data.bytes(), batch[i].source, batch[i].source_length);
    }
    auto sent = co_await c.send_batch(std::span(replies).first(*n));
    EXPECT_TRUE(sent && *sent == *n);
    for (size_t i = 0; i < *n; ++i) batch[i] = ReceivedDatagram{};
    echoed += *n;
  }
  // 4 x 100 bytes (400) to one peer: a run that may go as one UDP_SEGMENT send.
  std::array<OutgoingDatagram, 4> run;
  run.fill(OutgoingDatagram(first(payload, 100), p.local_address()));
  auto sent = co_await c.send_batch(run);
  EXPECT_TRUE(sent && *sent == 4);
  std::vector<std::byte> buffer(2048);
  for (size_t i = 0; i < 14; ++i) {
    auto got = co_await p.recv_from(buffer);
    EXPECT_TRUE(got);
    if (!got) co_return;
    ++out.echoes;
  }

  // 9,000 bytes: longer than either room, cut.
  (void)co_await p.send_to(first(payload, 9000), c.local_address());
  auto n = co_await c.receive_batch(std::span(batch).first(1));
  EXPECT_TRUE(n && *n == 1 && batch[0].truncated);
  out.kept_of_long = batch[0].data.size();
  batch[0] = ReceivedDatagram{};
  // 100 bytes into recv_from's 8-byte buffer: cut too.
  (void)co_await p.send_to(first(payload, 100), c.local_address());
  std::array<std::byte, 8> small;
  auto cut = co_await c.recv_from(small);
  EXPECT_TRUE(cut && cut->truncated && cut->size == 8);

  // Too long for IPv4: refused alone, and alone in a batch of three (the others, 20 bytes, go).
  auto refused = co_await c.send_to(payload, p.local_address());
  EXPECT_FALSE(refused);
  std::array<OutgoingDatagram, 3> mixed = {
      OutgoingDatagram(first(payload, 10), p.local_address()),
      OutgoingDatagram(first(payload, kMaxUdpPayloadIpv4 + 1), p.local_address()),
      OutgoingDatagram(first(payload, 10), p.local_address())};
  sent = co_await c.send_batch(mixed);
  EXPECT_TRUE(sent && *sent == 2);

  // Connected to a port nobody holds: the 1-byte send goes, the receive hears the refusal.
  const InetAddress nobody = (*gone)->local_address();
  co_await (*gone)->close();
  EXPECT_TRUE(c.connect(nobody));
  (void)co_await c.send(first(payload, 1));
  auto heard = co_await c.recv_from(buffer);
  EXPECT_FALSE(heard);
  if (!heard) out.refusal = heard.error();

  // A receive waiting when the socket closes ends with operation_canceled, not an error count.
  bool done = false;
  l.spawn([](UdpSocket& socket, Observed& o, bool& finished) -> Task<> {
    std::array<ReceivedDatagram, 4> waiting;
    auto result = co_await socket.receive_batch(waiting);
    if (!result) o.after_close = result.error();
    finished = true;
  }(c, out, done));
  co_await io::sleep_for(l, 5ms);
  out.segmented = c.segmented_sends();
  out.truncated = c.truncated();
  co_await c.close();
  for (int i = 0; i < 1000 && !done; ++i) co_await io::sleep_for(l, 1ms);
  EXPECT_TRUE(done);
  co_await p.close();
}

std::string line(const std::string& family, uint64_t value, const char* socket) {
  return "\n" + family + "{socket=\"" + socket + "\"} " + std::to_string(value) + "\n";
}

class UdpMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test()); }
};

TEST_F(UdpMetricsTest, CountsWhatTheSocketDidOnBothReceivePaths) {
  struct Path {
    const char* name;
    uint32_t max_datagram;
    bool multishot;
  };
  for (const Path& path : {Path{"loop_buffers", 1500, true}, Path{"one_recvmsg", 4000, false}}) {
    SCOPED_TRACE(path.name);
    auto loop = make_loop();
    ASSERT_TRUE(loop);
    UdpMetrics counted(2);
    metrics::Registry registry;
    ASSERT_TRUE(counted.add_to(registry, {{"socket", path.name}}));
    Observed o;
    ASSERT_TRUE(run(*loop, exercise(*loop, counted, path.max_datagram, o)));
    EXPECT_EQ(o.multishot, path.multishot);
    EXPECT_EQ(o.echoes, 14u);
    EXPECT_EQ(o.refusal, std::errc::connection_refused);
    EXPECT_EQ(o.after_close, std::errc::operation_canceled);

    // In: 10 echoed (550 bytes), the long one (its kept bytes), the one recv_from cut. Through
    // the loop's buffers the socket received that one whole (100 bytes) and the copy into the
    // 8-byte buffer cut it; one recvmsg received it straight into that buffer (8 bytes).
    const uint64_t bytes_in = 550 + o.kept_of_long + (path.multishot ? 100 : 8);
    EXPECT_EQ(counted.datagrams_received(), 12u);
    EXPECT_EQ(counted.bytes_received(), bytes_in);
    EXPECT_EQ(counted.truncated(), 2u);
    EXPECT_EQ(o.truncated, path.multishot ? 1u : 2u);  // the socket's: what the kernel cut
    EXPECT_EQ(counted.receive_errors(), 1u);
    // Out: 10 echoes (550), the run of 4 (400), 2 of the mixed batch (20), the connected 1.
    EXPECT_EQ(counted.datagrams_sent(), 17u);
    EXPECT_EQ(counted.bytes_sent(), 971u);
    EXPECT_EQ(counted.send_errors(), 2u);
    EXPECT_EQ(counted.segmented_sends(), o.segmented);
    EXPECT_LE(o.segmented, 1u);

    const std::string text = registry.render();
    EXPECT_NE(text.find(line("ucp_udp_datagrams_received_total", 12, path.name)), std::string::npos)
        << text;
    EXPECT_NE(text.find(line("ucp_udp_bytes_received_total", bytes_in, path.name)),
              std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_datagrams_truncated_total", 2, path.name)),
              std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_receive_errors_total", 1, path.name)), std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_datagrams_sent_total", 17, path.name)), std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_bytes_sent_total", 971, path.name)), std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_send_errors_total", 2, path.name)), std::string::npos);
    EXPECT_NE(text.find(line("ucp_udp_segmented_sends_total", o.segmented, path.name)),
              std::string::npos);
    EXPECT_NE(text.find("# TYPE ucp_udp_datagrams_received_total counter\n"), std::string::npos);

    if (!test::promtool_installed()) {
      std::printf("%s\n", test::kPromtoolMissing);
      continue;
    }
    const auto [code, said] = test::promtool(text);
    EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << text;
    EXPECT_EQ(said, "") << text;
  }
}

TEST_F(UdpMetricsTest, EachLoopCountsIntoAShardOfItsOwn) {
  std::array<std::unique_ptr<EventLoop>, 3> loops;
  for (auto& loop : loops) {
    loop = make_loop();
    ASSERT_TRUE(loop);
  }
  UdpMetrics counted(2);
  EXPECT_EQ(counted.shard_of(*loops[0]), 0u);
  EXPECT_EQ(counted.shard_of(*loops[1]), 1u);
  EXPECT_EQ(counted.shard_of(*loops[0]), 0u);
  EXPECT_EQ(counted.shard_of(*loops[2]), 1u);  // past the shards: the last one, shared
  counted.sent(0, 2, 30);
  counted.sent(1, 1, 5);
  EXPECT_EQ(counted.datagrams_sent(), 3u);
  EXPECT_EQ(counted.bytes_sent(), 35u);
}

TEST_F(UdpMetricsTest, RegistrationIsAllOrNothing) {
  metrics::Registry registry;
  metrics::Counter squatter;
  ASSERT_TRUE(registry.add("ucp_udp_bytes_sent", "Someone else's.", {}, squatter));
  UdpMetrics counted(1);
  auto added = counted.add_to(registry);
  ASSERT_FALSE(added);
  EXPECT_NE(added.error().message.find("ucp_udp_bytes_sent"), std::string::npos)
      << added.error().message;
  EXPECT_EQ(registry.render().find("ucp_udp_datagrams_received"), std::string::npos);
  registry.remove(squatter);
  // The same families under another label value share the registry.
  UdpMetrics other(1);
  ASSERT_TRUE(other.add_to(registry, {{"socket", "a"}}));
  EXPECT_FALSE(other.add_to(registry, {{"socket", "a"}}));
}

}  // namespace
}  // namespace ucp
