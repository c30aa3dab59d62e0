// ucp::UdpSocket over loopback on both backends, and both ways of receiving (the loop's
// receive buffers, or one recvmsg at a time). The echo runs on a loop thread; the client is
// plain blocking sockets with receive timeouts, so every wait is bounded and the check does
// not depend on the code under test.

#include "ucp/net/UdpSocket.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ucp/io/Operations.h"

#include "Backends.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

// Datagram contents: size s carries kPattern[s % 251 .. s % 251 + s).
const std::vector<char>& pattern_source() {
  static const std::vector<char> bytes = [] {
    std::vector<char> out(kMaxUdpPayload + 256);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>((i * 7 + i / 251) & 0xFF);
    return out;
  }();
  return bytes;
}
const char* pattern_for(size_t size) { return pattern_source().data() + size % 251; }

Task<> echo(UdpSocket& socket) {
  std::array<ReceivedDatagram, 64> batch;
  std::array<OutgoingDatagram, 64> replies;
  for (;;) {
    auto n = co_await socket.receive_batch(batch);
    if (!n) {
      if (n.error() == std::errc::operation_canceled) co_return;
      continue;  // a transient error of one datagram
    }
    for (size_t i = 0; i < *n; ++i) {
      replies[i] = OutgoingDatagram(batch[i].data.bytes(), batch[i].source, batch[i].source_length);
    }
    (void)co_await socket.send_batch(std::span(replies.data(), *n));
    for (size_t i = 0; i < *n; ++i) batch[i] = ReceivedDatagram{};
  }
}

enum class Receive { kLoopBuffers, kOneRecvmsg };

struct Param {
  BackendKind backend;
  Receive receive;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(test::backend_label(info.param.backend)) +
         (info.param.receive == Receive::kLoopBuffers ? "_loop_buffers" : "_one_recvmsg");
}

// An echo server on its own loop thread.
class EchoServer {
 public:
  EchoServer(const Param& param, const std::string& ip, uint32_t loop_buffers = 256) {
    LoopOptions options;
    options.backend = param.backend;
    options.ring_entries = 1024;
    options.provided_buffers_count = loop_buffers;
    // Room for the largest datagram, or not (then each receive is one recvmsg).
    options.provided_buffer_size = param.receive == Receive::kLoopBuffers ? 69632 : 4096;
    auto loop = EventLoop::create(options);
    if (!loop) {
      ADD_FAILURE() << loop.error().message();
      return;
    }
    loop_ = std::move(*loop);
    UdpOptions udp;
    udp.receive_buffer_bytes = 4 << 20;
    auto socket = UdpSocket::bind(*loop_, *InetAddress::parse(ip, 0), udp);
    if (!socket) {
      ADD_FAILURE() << socket.error().message();
      return;
    }
    socket_ = std::move(*socket);
    EXPECT_EQ(socket_->multishot(), param.receive == Receive::kLoopBuffers);
    port_ = socket_->local_address().port();
    loop_->post([this] { loop_->spawn(echo(*socket_)); });
    thread_ = std::thread([this] { loop_->run(); });
  }
  ~EchoServer() {
    if (!thread_.joinable()) return;
    loop_->post([this] {
      loop_->spawn([](EventLoop& l, UdpSocket& s) -> Task<> {
        co_await s.close();
        l.stop();
      }(*loop_, *socket_));
    });
    thread_.join();
  }
  bool ok() const { return thread_.joinable(); }
  uint16_t port() const { return port_; }
  /// The socket's loop_buffers_ran_out(), read on its loop; -1 when the loop did not answer.
  int64_t loop_buffers_ran_out() {
    std::atomic<int64_t> value{-1};
    loop_->post([&] { value = static_cast<int64_t>(socket_->loop_buffers_ran_out()); });
    for (int i = 0; i < 1000 && value < 0; ++i) std::this_thread::sleep_for(5ms);
    return value;
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<UdpSocket> socket_;
  std::thread thread_;
  uint16_t port_ = 0;
};

// How long a client waits for an echo that may never come (UDP): generous, for a loaded host.
constexpr int kEchoTimeoutSeconds = 10;

// A blocking client socket with a receive timeout and big buffers.
struct Client {
  UniqueFd fd;
  sockaddr_storage server{};
  socklen_t server_length = 0;

  Client(const std::string& ip, uint16_t port) {
    auto address = *InetAddress::parse(ip, port);
    std::memcpy(&server, address.get(), address.length());
    server_length = address.length();
    fd = UniqueFd(::socket(address.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
    int bytes = 8 << 20;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
    timeval timeout{kEchoTimeoutSeconds, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  bool send(const char* data, size_t size) const {
    for (;;) {
      const ssize_t n = ::sendto(fd.get(), data, size, 0,
                                 reinterpret_cast<const sockaddr*>(&server), server_length);
      if (n >= 0 || errno != EINTR) return n == static_cast<ssize_t>(size);
    }
  }
  // -1: nothing within the timeout. A signal (the sanitizers' runtimes send some) retries.
  ssize_t receive(std::vector<char>& buffer) const {
    for (;;) {
      const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), MSG_TRUNC);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
};

// Sends every size of `sizes` (16 in flight) and checks every echo. Returns a description of
// the first problem, or "".
std::string round_trip(const Client& client, const std::vector<size_t>& sizes) {
  std::vector<char> buffer(kMaxUdpPayload + 16);
  constexpr size_t kWindow = 16;
  for (size_t begin = 0; begin < sizes.size(); begin += kWindow) {
    const size_t end = std::min(sizes.size(), begin + kWindow);
    std::map<size_t, int> waiting;
    for (size_t i = begin; i < end; ++i) {
      if (!client.send(pattern_for(sizes[i]), sizes[i])) {
        return "send of " + std::to_string(sizes[i]) + " bytes failed: " + std::strerror(errno);
      }
      ++waiting[sizes[i]];
    }
    for (size_t i = begin; i < end; ++i) {
      const ssize_t n = client.receive(buffer);
      if (n < 0) {
        return "no echo within " + std::to_string(kEchoTimeoutSeconds) + " s (" +
               std::to_string(waiting.size()) + " missing): " + std::strerror(errno);
      }
      const auto size = static_cast<size_t>(n);
      auto it = waiting.find(size);
      if (it == waiting.end()) return "an echo of unexpected size " + std::to_string(size);
      if (std::memcmp(buffer.data(), pattern_for(size), size) != 0) {
        return "the echo of " + std::to_string(size) + " bytes differs";
      }
      if (--it->second == 0) waiting.erase(it);
    }
  }
  return "";
}

class UdpEcho : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam().backend); }
};

INSTANTIATE_TEST_SUITE_P(Backends, UdpEcho,
                         ::testing::Values(Param{BackendKind::kIoUring, Receive::kLoopBuffers},
                                           Param{BackendKind::kIoUring, Receive::kOneRecvmsg},
                                           Param{BackendKind::kEpoll, Receive::kLoopBuffers},
                                           Param{BackendKind::kEpoll, Receive::kOneRecvmsg}),
                         param_name);

// Every size from 0 to 65,507 with the loop's buffers; every 61st (and the ends) with one
// recvmsg at a time, which shares no code with the batch path below the socket.
TEST_P(UdpEcho, EchoesEveryDatagramSizeUnchanged) {
  EchoServer server(GetParam(), "127.0.0.1");
  ASSERT_TRUE(server.ok());
  Client client("127.0.0.1", server.port());
  std::vector<size_t> sizes;
  const size_t step = GetParam().receive == Receive::kLoopBuffers ? 1 : 61;
  for (size_t size = 0; size <= kMaxUdpPayloadIpv4; size += step) sizes.push_back(size);
  sizes.push_back(kMaxUdpPayloadIpv4);
  EXPECT_EQ(round_trip(client, sizes), "");
}

TEST_P(UdpEcho, EchoesOverIpv6UpToItsLargestDatagram) {
  UniqueFd probe(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_loopback;
  if (!probe || ::bind(probe.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  EchoServer server(GetParam(), "::1");
  ASSERT_TRUE(server.ok());
  Client client("::1", server.port());
  std::vector<size_t> sizes = {0, 1, 1232, 1452, 9000, 65507, 65527};
  for (size_t size = 2; size < 65527; size += 4099) sizes.push_back(size);
  EXPECT_EQ(round_trip(client, sizes), "");
}

// Many datagrams at once, faster than the echo drains them: UDP may drop some under overload
// (counted and reported), but every echo that arrives is whole and unchanged, none arrives
// twice, and the server still answers afterwards.
void flood(const EchoServer& server) {
  Client client("127.0.0.1", server.port());
  constexpr uint32_t kDatagrams = 20000;
  std::vector<char> datagram(1400);
  for (uint32_t i = 0; i < kDatagrams; ++i) {
    const size_t size = 8 + (i * 131) % 1392;
    std::memcpy(datagram.data(), &i, 4);
    const auto length = static_cast<uint32_t>(size);
    std::memcpy(datagram.data() + 4, &length, 4);
    std::memcpy(datagram.data() + 8, pattern_for(size), size - 8);
    ASSERT_TRUE(client.send(datagram.data(), size)) << std::strerror(errno);
  }
  std::vector<bool> seen(kDatagrams);
  size_t received = 0, corrupted = 0, duplicated = 0;
  std::vector<char> buffer(2048);
  timeval short_wait{0, 300000};  // the flood is over once 300 ms pass without an echo
  ::setsockopt(client.fd.get(), SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  for (;;) {
    const ssize_t n = client.receive(buffer);
    if (n < 0) break;
    uint32_t index = 0, length = 0;
    if (n < 8) {
      ++corrupted;
      continue;
    }
    std::memcpy(&index, buffer.data(), 4);
    std::memcpy(&length, buffer.data() + 4, 4);
    if (index >= kDatagrams || length != static_cast<size_t>(n) ||
        std::memcmp(buffer.data() + 8, pattern_for(length), length - 8) != 0) {
      ++corrupted;
      continue;
    }
    if (seen[index]) ++duplicated;
    seen[index] = true;
    ++received;
  }
  const size_t lost = kDatagrams - received;
  std::printf("flood: %u sent, %zu echoed, %zu lost (%.1f%%)\n", kDatagrams, received, lost,
              100.0 * static_cast<double>(lost) / kDatagrams);
  ::testing::Test::RecordProperty("lost", static_cast<int>(lost));
  EXPECT_EQ(corrupted, 0u);
  EXPECT_EQ(duplicated, 0u);
  EXPECT_GT(received, 0u);
  // Answered after the flood, on another socket: echoes of the flood may still be on their way
  // to the first one (300 ms of silence does not mean the server has caught up on a loaded host).
  Client after("127.0.0.1", server.port());
  EXPECT_EQ(round_trip(after, {0, 100, 65507}), "");
}

TEST_P(UdpEcho, FloodLosesDatagramsOnlyWholeAndKeepsServing) {
  EchoServer server(GetParam(), "127.0.0.1");
  ASSERT_TRUE(server.ok());
  flood(server);
}

// Four loop buffers for a flood of 20,000: the buffers run out (io_uring ends the multishot
// receive with ENOBUFS; epoll's recvmmsg finds none free) while the echo still holds them, and
// the socket goes on through the pool and re-arms; nothing grows, nothing is corrupted.
TEST_P(UdpEcho, FloodWithFourLoopBuffersRunsThemDryAndRecovers) {
  if (GetParam().receive != Receive::kLoopBuffers) GTEST_SKIP() << "no loop buffers used";
  EchoServer server(GetParam(), "127.0.0.1", /*loop_buffers=*/4);
  ASSERT_TRUE(server.ok());
  flood(server);
  const int64_t ran_out = server.loop_buffers_ran_out();
  std::printf("loop buffers ran out %lld times\n", static_cast<long long>(ran_out));
  EXPECT_GT(ran_out, 0);
}

// ---- the socket's own API, in one loop ----

class UdpSocketApi : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam());
    LoopOptions options;
    options.backend = GetParam();
    options.provided_buffers_count = 64;
    options.provided_buffer_size = 69632;
    auto loop = EventLoop::create(options);
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
  }
  void run(Task<> body) {
    bool finished = false;
    loop_->spawn([](EventLoop& l, Task<> inner, bool& done) -> Task<> {
      co_await std::move(inner);
      done = true;
      l.stop();
    }(*loop_, std::move(body), finished));
    loop_->spawn([](EventLoop& l) -> Task<> {
      co_await io::sleep_for(l, 20s);
      l.stop();
    }(*loop_));
    loop_->run();
    EXPECT_TRUE(finished) << "the test body did not finish";
  }
  std::unique_ptr<EventLoop> loop_;
};

INSTANTIATE_TEST_SUITE_P(Backends, UdpSocketApi, test::kAllBackends, test::backend_name);

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST_P(UdpSocketApi, SendToAndRecvFromNameEachOther) {
  struct Outcome {
    std::string first, reply;
    uint16_t first_from = 0, reply_from = 0;
    uint16_t a_port = 0, b_port = 0;
    bool cut = false;
    size_t cut_size = 0;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto a = UdpSocket::bind(l, local);
    auto b = UdpSocket::bind(l, local);
    EXPECT_TRUE(a && b);
    if (!a || !b) co_return;
    out.a_port = (*a)->local_address().port();
    out.b_port = (*b)->local_address().port();
    auto sent = co_await (*a)->send_to(bytes_of("ping"), (*b)->local_address());
    EXPECT_TRUE(sent && *sent == 4);
    std::array<std::byte, 64> buffer;
    auto got = co_await (*b)->recv_from(buffer);
    EXPECT_TRUE(got);
    if (!got) co_return;
    out.first.assign(reinterpret_cast<const char*>(buffer.data()), got->size);
    out.first_from = got->from.port();
    (void)co_await (*b)->send_to(bytes_of("pong, longer than eight"), got->from);
    std::array<std::byte, 8> small;
    auto reply = co_await (*a)->recv_from(small);
    EXPECT_TRUE(reply);
    if (!reply) co_return;
    out.reply.assign(reinterpret_cast<const char*>(small.data()), reply->size);
    out.reply_from = reply->from.port();
    out.cut = reply->truncated;
    co_await (*a)->close();
    co_await (*b)->close();
  }(*loop_, o));
  EXPECT_EQ(o.first, "ping");
  EXPECT_EQ(o.first_from, o.a_port);
  EXPECT_EQ(o.reply, "pong, lo");  // cut to the buffer, and said so
  EXPECT_TRUE(o.cut);
  EXPECT_EQ(o.reply_from, o.b_port);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// A connected socket hears an ICMP port unreachable as connection_refused, once, and keeps
// working after it.
TEST_P(UdpSocketApi, ConnectedSocketReportsARefusalOnceAndGoesOn) {
  struct Outcome {
    Result<ReceivedFrom> refused = ReceivedFrom{};
    std::string after;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto gone = UdpSocket::bind(l, local);
    auto a = UdpSocket::bind(l, local);
    auto b = UdpSocket::bind(l, local);
    if (!gone || !a || !b) co_return;
    const InetAddress nobody = (*gone)->local_address();
    co_await (*gone)->close();
    EXPECT_TRUE((*a)->connect(nobody));
    (void)co_await (*a)->send(bytes_of("anyone?"));
    std::array<std::byte, 64> buffer;
    out.refused = co_await (*a)->recv_from(buffer);
    EXPECT_TRUE((*a)->connect((*b)->local_address()));
    (void)co_await (*b)->send_to(bytes_of("still here"), (*a)->local_address());
    auto got = co_await (*a)->recv_from(buffer);
    if (got) out.after.assign(reinterpret_cast<const char*>(buffer.data()), got->size);
    co_await (*a)->close();
    co_await (*b)->close();
  }(*loop_, o));
  ASSERT_FALSE(o.refused);
  EXPECT_EQ(o.refused.error(), std::errc::connection_refused);
  EXPECT_EQ(o.after, "still here");
  EXPECT_EQ(loop_->in_flight(), 0u);
}

TEST_P(UdpSocketApi, CloseWakesAWaitingReceiverWithCanceled) {
  Result<size_t> waited = size_t{0};
  run([](EventLoop& l, Result<size_t>& out) -> Task<> {
    auto s = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0));
    if (!s) co_return;
    bool done = false;
    l.spawn([](UdpSocket& socket, Result<size_t>& result, bool& finished) -> Task<> {
      std::array<ReceivedDatagram, 4> batch;
      result = co_await socket.receive_batch(batch);
      finished = true;
    }(**s, out, done));
    co_await io::sleep_for(l, 5ms);
    co_await (*s)->close();
    for (int i = 0; i < 1000 && !done; ++i) co_await io::sleep_for(l, 1ms);
    EXPECT_TRUE(done);
  }(*loop_, waited));
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error(), std::errc::operation_canceled);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// receive_batch() writes each datagram over whatever its slot held: the lease there goes back
// to the loop (one slot reused for more datagrams than the loop has buffers never runs them
// dry), and `source` is the sender's address with zeros past it, even over a longer one.
TEST_P(UdpSocketApi, ReceiveBatchWritesAReusedSlotWhole) {
  struct Outcome {
    int received = 0;
    int exact = 0;
    uint64_t ran_out = 0;
    bool multishot = false;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto a = UdpSocket::bind(l, local);
    auto b = UdpSocket::bind(l, local);
    EXPECT_TRUE(a && b);
    if (!a || !b) co_return;
    out.multishot = (*b)->multishot();
    const uint16_t a_port = (*a)->local_address().port();
    std::array<ReceivedDatagram, 1> slot;
    for (int i = 0; i < 100; ++i) {  // more datagrams than the loop's 64 buffers
      ReceivedDatagram& d = slot[0];
      std::memset(&d.source, 0xAB, sizeof d.source);  // as if a longer address were there
      d.source_length = sizeof d.source;
      (void)co_await (*a)->send_to(bytes_of("x"), (*b)->local_address());
      auto n = co_await (*b)->receive_batch(slot);  // the last datagram's lease still in d
      if (!n || *n != 1) break;
      ++out.received;
      sockaddr_in from;
      std::memcpy(&from, &d.source, sizeof from);
      const auto* bytes = reinterpret_cast<const unsigned char*>(&d.source);
      bool exact = d.source_length == sizeof from && from.sin_family == AF_INET &&
                   ntohs(from.sin_port) == a_port && d.data.size() == 1 && !d.truncated;
      for (size_t k = sizeof from; k < sizeof d.source; ++k) exact = exact && bytes[k] == 0;
      if (exact) ++out.exact;
    }
    out.ran_out = (*b)->loop_buffers_ran_out();
    slot[0].data.reset();
    co_await (*a)->close();
    co_await (*b)->close();
  }(*loop_, o));
  EXPECT_EQ(o.received, 100);
  EXPECT_EQ(o.exact, 100);
  if (o.multishot) {
    EXPECT_EQ(o.ran_out, 0u);
  }
  EXPECT_EQ(loop_->in_flight(), 0u);
}

TEST_P(UdpSocketApi, ReceiveBufferIsWhatWasAskedOrWhatTheKernelAllows) {
  run([](EventLoop& l) -> Task<> {
    UdpOptions options;
    options.receive_buffer_bytes = 1 << 20;
    auto s = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0), options);
    EXPECT_TRUE(s);
    if (!s) co_return;
    // Asked 1 MiB: got it, or whatever net.core.rmem_max allows an unprivileged process.
    EXPECT_GT((*s)->receive_buffer_bytes(), 0u);
    EXPECT_LE((*s)->receive_buffer_bytes(), 1u << 20);
    co_await (*s)->close();
  }(*loop_));
}

// A datagram longer than the room is cut and flagged, on both receive paths, and the socket
// receives whole ones after it.
TEST_P(UdpSocketApi, LongerDatagramsAreCutAndFlaggedNeverTakenForWholeOnes) {
  struct Outcome {
    bool multishot[2] = {};
    std::vector<std::pair<size_t, bool>> got[2];
    uint64_t truncated[2] = {};
  } o;
  // 2,048-byte loop buffers: room for 1,500 (multishot); a 4,000 maximum does not fit, so that
  // socket receives into 4,000-byte pool blocks one recvmsg at a time.
  LoopOptions options;
  options.backend = GetParam();
  options.provided_buffers_count = 16;
  options.provided_buffer_size = 2048;
  auto small = EventLoop::create(options);
  ASSERT_TRUE(small) << small.error().message();
  loop_ = std::move(*small);
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const uint32_t maxima[2] = {1500, 4000};
    for (int k = 0; k < 2; ++k) {
      UdpOptions udp;
      udp.max_datagram_bytes = maxima[k];
      auto receiver = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0), udp);
      auto sender = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0));
      EXPECT_TRUE(receiver && sender);
      if (!receiver || !sender) co_return;
      out.multishot[k] = (*receiver)->multishot();
      std::vector<std::byte> payload(9000, std::byte{0x5A});
      for (size_t size : {size_t{100}, size_t{9000}, size_t{10}}) {
        (void)co_await (*sender)->send_to(std::span(payload.data(), size),
                                          (*receiver)->local_address());
        std::array<ReceivedDatagram, 1> batch;
        auto n = co_await (*receiver)->receive_batch(batch);
        EXPECT_TRUE(n && *n == 1);
        if (!n) co_return;
        out.got[k].emplace_back(batch[0].data.size(), batch[0].truncated);
      }
      out.truncated[k] = (*receiver)->truncated();
      co_await (*receiver)->close();
      co_await (*sender)->close();
    }
  }(*loop_, o));
  EXPECT_TRUE(o.multishot[0]);
  EXPECT_FALSE(o.multishot[1]);
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k == 0 ? "loop buffers" : "one recvmsg into a pool block");
    ASSERT_EQ(o.got[k].size(), 3u);
    EXPECT_EQ(o.got[k][0], std::make_pair(size_t{100}, false));
    EXPECT_TRUE(o.got[k][1].second);
    EXPECT_LT(o.got[k][1].first, 9000u);
    EXPECT_EQ(o.got[k][2], std::make_pair(size_t{10}, false));
    EXPECT_EQ(o.truncated[k], 1u);
  }
}

// A datagram too large for IPv4 is refused with message_size as a value; in a batch it is lost
// alone (counted), and the others go out.
TEST_P(UdpSocketApi, OversizedDatagramIsAnErrorValueAndLostAloneInABatch) {
  struct Outcome {
    Result<size_t> single = 0, batch = 0;
    uint64_t send_failures = 0;
    std::vector<size_t> received;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    auto a = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0));
    auto b = UdpSocket::bind(l, *InetAddress::parse("127.0.0.1", 0));
    if (!a || !b) co_return;
    std::vector<std::byte> big(kMaxUdpPayloadIpv4 + 1, std::byte{1});
    out.single = co_await (*a)->send_to(big, (*b)->local_address());
    const InetAddress& to = (*b)->local_address();
    std::array<OutgoingDatagram, 3> batch = {
        OutgoingDatagram(std::span<const std::byte>(big).first(7), to),
        OutgoingDatagram(std::span<const std::byte>(big), to),
        OutgoingDatagram(std::span<const std::byte>(big).first(9), to)};
    out.batch = co_await (*a)->send_batch(batch);
    out.send_failures = (*a)->send_failures();
    std::array<std::byte, 64> buffer;
    for (int i = 0; i < 2; ++i) {
      auto got = co_await (*b)->recv_from(buffer);
      if (got) out.received.push_back(got->size);
    }
    co_await (*a)->close();
    co_await (*b)->close();
  }(*loop_, o));
  ASSERT_FALSE(o.single);
  EXPECT_EQ(o.single.error(), std::errc::message_size);
  ASSERT_TRUE(o.batch) << o.batch.error().message();
  EXPECT_EQ(*o.batch, 2u);
  EXPECT_EQ(o.send_failures, 1u);
  EXPECT_EQ(o.received, (std::vector<size_t>{7, 9}));
}

// Datagram k of a batch: `size` bytes of value k + 1, so that a receiver can tell where each one
// begins and ends.
struct Numbered {
  size_t size;
  std::vector<std::byte> bytes;
  Numbered(size_t n, size_t k) : size(n), bytes(n, static_cast<std::byte>(k + 1)) {}
};

// What a receiver got: (size, value of every byte, or -1 when they differ).
Task<std::vector<std::pair<size_t, int>>> receive_numbered(UdpSocket& socket, size_t count) {
  std::vector<std::pair<size_t, int>> out;
  std::vector<std::byte> buffer(4096);
  for (size_t i = 0; i < count; ++i) {
    auto got = co_await socket.recv_from(buffer);
    EXPECT_TRUE(got);
    if (!got) break;
    int value = got->size > 0 ? static_cast<int>(buffer[0]) : 0;
    for (size_t j = 0; j < got->size; ++j) {
      if (buffer[j] != buffer[0]) value = -1;
    }
    out.emplace_back(got->size, value);
  }
  co_return out;
}

// Back-to-back datagrams to one peer, each as long as the first (the last may be shorter), go
// as one UDP_SEGMENT send, and arrive as the separate datagrams they were; other runs (another
// peer, a longer one, too long to segment) go on their own.
TEST_P(UdpSocketApi, RunsOfEqualDatagramsToOnePeerGoAsOneSendAndArriveApart) {
  struct Outcome {
    Result<size_t> sent = 0;
    uint64_t segmented = 0, failures = 0;
    std::vector<std::pair<size_t, int>> at_b, at_c;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto a = UdpSocket::bind(l, local);
    auto b = UdpSocket::bind(l, local);
    auto c = UdpSocket::bind(l, local);
    if (!a || !b || !c) co_return;
    EXPECT_TRUE((*a)->segmenting());
    const InetAddress& to_b = (*b)->local_address();
    const InetAddress& to_c = (*c)->local_address();
    // b: [100 100 60] one send, c: [100], b: [100 120] (longer: apart) [100 100] one send,
    // b: [2000 2000] (too long to segment).
    const std::vector<std::pair<size_t, const InetAddress*>> plan = {
        {100, &to_b}, {100, &to_b}, {60, &to_b},  {100, &to_c},  {100, &to_b},
        {120, &to_b}, {100, &to_b}, {100, &to_b}, {2000, &to_b}, {2000, &to_b}};
    std::vector<Numbered> payloads;
    std::vector<OutgoingDatagram> batch;
    for (size_t k = 0; k < plan.size(); ++k) payloads.emplace_back(plan[k].first, k);
    for (size_t k = 0; k < plan.size(); ++k) batch.emplace_back(payloads[k].bytes, *plan[k].second);
    out.sent = co_await (*a)->send_batch(batch);
    out.segmented = (*a)->segmented_sends();
    out.failures = (*a)->send_failures();
    out.at_b = co_await receive_numbered(**b, 9);
    out.at_c = co_await receive_numbered(**c, 1);
    co_await (*a)->close();
    co_await (*b)->close();
    co_await (*c)->close();
  }(*loop_, o));
  ASSERT_TRUE(o.sent) << o.sent.error().message();
  EXPECT_EQ(*o.sent, 10u);
  EXPECT_EQ(o.segmented, 2u);  // [100 100 60] and [100 100] (after the 120)
  EXPECT_EQ(o.failures, 0u);
  using Got = std::vector<std::pair<size_t, int>>;
  EXPECT_EQ(o.at_b, (Got{{100, 1},
                         {100, 2},
                         {60, 3},
                         {100, 5},
                         {120, 6},
                         {100, 7},
                         {100, 8},
                         {2000, 9},
                         {2000, 10}}));
  EXPECT_EQ(o.at_c, (Got{{100, 4}}));
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// A path that refuses segmented sends (here: UDP checksums turned off on the sender, which GSO
// needs) costs no datagram: the run goes again one by one, and the socket stops segmenting.
// UdpOptions::segment_sends = false never segments.
TEST_P(UdpSocketApi, ARefusedSegmentedSendGoesAgainOneByOne) {
  struct Outcome {
    Result<size_t> refused = 0, off = 0;
    bool still_segmenting = true;
    uint64_t segmented[2] = {1, 1}, failures[2] = {1, 1};
    std::vector<std::pair<size_t, int>> got;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto a = UdpSocket::bind(l, local);
    UdpOptions plain;
    plain.segment_sends = false;
    auto d = UdpSocket::bind(l, local, plain);
    auto b = UdpSocket::bind(l, local);
    if (!a || !b || !d) co_return;
    const int on = 1;
    EXPECT_EQ(::setsockopt((*a)->fd(), SOL_SOCKET, SO_NO_CHECK, &on, sizeof on), 0);
    std::vector<Numbered> payloads;
    for (size_t k = 0; k < 5; ++k) payloads.emplace_back(200, k);
    std::vector<OutgoingDatagram> batch;
    for (auto& p : payloads) batch.emplace_back(p.bytes, (*b)->local_address());
    out.refused = co_await (*a)->send_batch(batch);
    out.still_segmenting = (*a)->segmenting();
    out.segmented[0] = (*a)->segmented_sends();
    out.failures[0] = (*a)->send_failures();
    out.off = co_await (*d)->send_batch(batch);
    out.segmented[1] = (*d)->segmented_sends();
    out.failures[1] = (*d)->send_failures();
    out.got = co_await receive_numbered(**b, 10);
    co_await (*a)->close();
    co_await (*b)->close();
    co_await (*d)->close();
  }(*loop_, o));
  ASSERT_TRUE(o.refused) << o.refused.error().message();
  EXPECT_EQ(*o.refused, 5u);
  EXPECT_FALSE(o.still_segmenting);
  ASSERT_TRUE(o.off) << o.off.error().message();
  EXPECT_EQ(*o.off, 5u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(o.segmented[k], 0u);
    EXPECT_EQ(o.failures[k], 0u);
  }
  using Got = std::vector<std::pair<size_t, int>>;
  EXPECT_EQ(o.got, (Got{{200, 1},
                        {200, 2},
                        {200, 3},
                        {200, 4},
                        {200, 5},
                        {200, 1},
                        {200, 2},
                        {200, 3},
                        {200, 4},
                        {200, 5}}));
  EXPECT_EQ(loop_->in_flight(), 0u);
}

}  // namespace
}  // namespace ucp
