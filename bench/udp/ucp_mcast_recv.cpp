// ucp_mcast_recv: UCP's multicast receive path for scripts/bench-mcast.sh, on the public API:
// one EventLoop, one UdpSocket bound to the wildcard address on the group's port and joined to
// the group, receiving from the loop's receive buffers (the multishot receive: io_uring
// multishot recvmsg into the buffer ring; epoll recvmmsg) in one of two ways (-m):
//   handler (the default): on_datagram(), each datagram checked in a handler called from its
//     completion, its buffer back to the loop when the handler returns. What
//     examples/market_data.cpp does, without its log line per gap.
//   batch: a coroutine's receive_batch() of up to 64 datagrams lent, each lease dropped once its
//     datagram is checked.
//
//   ucp_mcast_recv -g GROUP -p PORT [-i INTERFACE] [-B io_uring|epoll] [-m handler|batch]
//                  [-n BUFFERS] [-r RCVBUF] [-d SECONDS]
//
// Each datagram starts with a 64-bit big-endian sequence number (bin/mcast_send), whose top 8
// bits name the sender's stream: within a stream a jump forward is a gap of that many missing,
// an older number a late copy; number 0 is warm-up traffic, counted apart and not checked.
// INTERFACE names the interface joined on (default 127.0.0.1); BUFFERS is the loop's receive
// buffers of 4 KiB (default 4096, a server loop's); RCVBUF is UdpOptions::receive_buffer_bytes
// (default 4 MiB). It prints "joined GROUP:PORT (BACKEND, multishot on|off)" once joined and,
// at exit (SIGINT/SIGTERM, or after SECONDS), one line:
//   received N gaps G missing M late L warmup W short B seconds S wakeups K buffers_ran_out R
//   completion_overflows O
// (K: the loop's io_uring_enter or epoll_wait calls; R: times the loop's receive buffers ran
// out; O: times completions waited in the kernel's overflow list).

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "ucp/io/EventLoop.h"
#include "ucp/io/PeriodicTimer.h"
#include "ucp/net/UdpSocket.h"

namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Sequence numbers per stream: the top 8 bits of the 64 name the sender (mcast_send -t).
struct Feed {
  static constexpr uint64_t kNumberMask = (uint64_t{1} << 56) - 1;
  std::array<uint64_t, 256> next{};  // per stream, the number expected; 0 before the first one
  uint64_t received = 0, gaps = 0, missing = 0, late = 0, warmup = 0, short_ = 0;

  void on_datagram(std::span<const std::byte> bytes) {
    if (bytes.size() < 8) return void(++short_);
    uint64_t sequence = 0;
    for (size_t i = 0; i < 8; ++i) sequence = sequence << 8 | std::to_integer<uint64_t>(bytes[i]);
    const uint64_t number = sequence & kNumberMask;
    if (number == 0) return void(++warmup);
    ++received;
    uint64_t& expected = next[sequence >> 56];
    if (expected != 0 && number < expected) return void(++late);
    if (expected != 0 && number > expected) {
      ++gaps;
      missing += number - expected;
    }
    expected = number + 1;
  }
};

ucp::Task<> receive(ucp::UdpSocket& socket, Feed& feed) {
  std::array<ucp::ReceivedDatagram, 64> batch;
  for (;;) {
    auto n = co_await socket.receive_batch(batch);
    if (!n && n.error() == std::errc::operation_canceled) break;  // stopping
    // Each datagram is read where receive_batch() put it and its lease dropped at once: the
    // buffer goes back to the loop (no ReceivedDatagram moved out of the batch and destroyed).
    for (size_t i = 0; n && i < *n; ++i) {
      feed.on_datagram(batch[i].data.bytes());
      batch[i].data.reset();
    }
  }
  co_await socket.close();
}

// Stops the loop on SIGINT/SIGTERM or at `end`; 20 wake-ups a second at most.
ucp::Task<> watch(ucp::EventLoop& loop, Clock::time_point end) {
  ucp::PeriodicTimer timer(loop, std::chrono::milliseconds(50));
  while (co_await timer.tick()) {
    if (g_stop || Clock::now() >= end) break;
  }
  loop.stop();
}

}  // namespace

int main(int argc, char** argv) {
  const char* group = nullptr;
  std::string interface = "127.0.0.1";
  uint16_t port = 0;
  std::string_view backend = "io_uring";
  std::string_view mode = "handler";
  uint32_t buffers = 4096;
  uint32_t receive_buffer = 4 << 20;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-g") group = argv[i + 1];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-i") interface = argv[i + 1];
    if (flag == "-B") backend = argv[i + 1];
    if (flag == "-m") mode = argv[i + 1];
    if (flag == "-n") buffers = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    if (flag == "-r") receive_buffer = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
  }
  if (group == nullptr || port == 0 || (backend != "io_uring" && backend != "epoll") ||
      (mode != "handler" && mode != "batch")) {
    std::fprintf(stderr,
                 "usage: %s -g GROUP -p PORT [-i INTERFACE] [-B io_uring|epoll] "
                 "[-m handler|batch] [-n BUFFERS] [-r RCVBUF] [-d SECONDS]\n",
                 argv[0]);
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  ucp::LoopOptions loop_options;
  loop_options.backend = backend == "epoll" ? ucp::BackendKind::kEpoll : ucp::BackendKind::kIoUring;
  loop_options.provided_buffers_count = buffers;
  auto created = ucp::EventLoop::create(loop_options);
  if (!created) {
    std::fprintf(stderr, "ucp_mcast_recv: %s\n",
                 ucp::EventLoop::describe_setup_error(created.error(), loop_options).c_str());
    return 1;
  }
  ucp::EventLoop& loop = **created;

  const auto group_address = ucp::InetAddress::parse(group, 0);
  if (!group_address || !ucp::is_multicast(*group_address)) {
    std::fprintf(stderr, "ucp_mcast_recv: %s is not a multicast address\n", group);
    return 2;
  }
  const char* wildcard = group_address->family() == AF_INET6 ? "::" : "0.0.0.0";
  ucp::UdpOptions options;
  options.max_datagram_bytes = loop_options.provided_buffer_size - 48;  // fits a loop buffer
  options.receive_buffer_bytes = receive_buffer;
  auto socket = ucp::UdpSocket::bind(loop, *ucp::InetAddress::parse(wildcard, port), options);
  if (!socket) {
    std::fprintf(stderr, "ucp_mcast_recv: bind: %s\n", socket.error().message().c_str());
    return 1;
  }
  ucp::MulticastGroup membership;
  membership.group = *group_address;
  membership.interface = interface;
  if (auto joined = (*socket)->join(membership); !joined) {
    std::fprintf(stderr, "ucp_mcast_recv: join: %s\n", joined.error().message().c_str());
    return 1;
  }
  Feed feed;
  if (mode == "handler") {
    auto set =
        (*socket)->on_datagram([&feed](const ucp::DatagramRef& d) { feed.on_datagram(d.data); });
    if (!set) {
      std::fprintf(stderr, "ucp_mcast_recv: on_datagram: %s\n", set.error().message().c_str());
      return 1;
    }
  }
  std::printf("joined %s:%u (%s, multishot %s, %s)\n", group, port, loop.backend_name(),
              (*socket)->multishot() ? "on" : "off", mode == "handler" ? "handler" : "batch");
  std::fflush(stdout);

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds > 0 ? seconds : 1e9));
  if (mode == "batch") loop.spawn(receive(**socket, feed));
  loop.spawn(watch(loop, end));
  loop.run();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "received %llu gaps %llu missing %llu late %llu warmup %llu short %llu seconds %.3f "
      "wakeups %llu buffers_ran_out %llu completion_overflows %llu\n",
      static_cast<unsigned long long>(feed.received), static_cast<unsigned long long>(feed.gaps),
      static_cast<unsigned long long>(feed.missing), static_cast<unsigned long long>(feed.late),
      static_cast<unsigned long long>(feed.warmup), static_cast<unsigned long long>(feed.short_),
      elapsed, static_cast<unsigned long long>(loop.stats().submit_calls),
      static_cast<unsigned long long>((*socket)->loop_buffers_ran_out()),
      static_cast<unsigned long long>(loop.stats().completion_overflows));
  return 0;
}
