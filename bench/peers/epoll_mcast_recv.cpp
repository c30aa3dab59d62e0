// epoll_mcast_recv: the multicast receiver UCP's is measured against (scripts/bench-mcast.sh):
// one thread, one socket bound to the wildcard address on the group's port and joined to the
// group, level-triggered epoll, and on EPOLLIN recvmmsg batches of BATCH (64) datagrams into
// their own 4 KiB buffers until EAGAIN: the best a plain epoll loop can do.
//
//   epoll_mcast_recv -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-b BATCH] [-r RCVBUF] [-d SECONDS]
//
// Each datagram starts with a 64-bit big-endian sequence number (bin/mcast_send), whose top 8
// bits name the sender's stream: within a stream a jump forward is a gap of that many missing,
// an older number a late copy; number 0 is warm-up traffic, counted apart and not checked.
// INTERFACE_ADDRESS is the local address of the interface joined on (default 127.0.0.1).
// RCVBUF is SO_RCVBUF (default 4 MiB; SO_RCVBUFFORCE when permitted). Like UCP's sockets it
// turns off IP_MULTICAST_ALL. Nothing is printed per datagram. It prints "joined GROUP:PORT"
// once joined and, at exit (SIGINT/SIGTERM, or after SECONDS), one line:
//   received N gaps G missing M late L warmup W short B seconds S wakeups K
// (K: epoll_wait calls that returned the socket readable).

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr size_t kSlot = 4096;  // a buffer per datagram, the size of UCP's loop buffers

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Sequence numbers per stream: the top 8 bits of the 64 name the sender (mcast_send -t).
struct Feed {
  static constexpr uint64_t kNumberMask = (uint64_t{1} << 56) - 1;
  std::array<uint64_t, 256> next{};  // per stream, the number expected; 0 before the first one
  uint64_t received = 0, gaps = 0, missing = 0, late = 0, warmup = 0, short_ = 0;

  void on_datagram(const unsigned char* bytes, size_t size) {
    if (size < 8) return void(++short_);
    uint64_t sequence = 0;
    for (size_t i = 0; i < 8; ++i) sequence = sequence << 8 | bytes[i];
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

int join_group(const char* group, uint16_t port, const char* interface, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer, sizeof receive_buffer) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  const int off = 0;
  ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof off);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ip_mreqn membership{};
  if (::inet_pton(AF_INET, group, &membership.imr_multiaddr) != 1 ||
      ::inet_pton(AF_INET, interface, &membership.imr_address) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &membership, sizeof membership) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One recvmmsg per batch, until the socket is drained.
class Batched {
 public:
  explicit Batched(size_t batch) : buffers_(batch * kSlot), vectors_(batch), messages_(batch) {}

  void drain(int fd, Feed& feed) {
    const auto batch = static_cast<unsigned>(messages_.size());
    for (;;) {
      for (unsigned i = 0; i < batch; ++i) {
        vectors_[i] = {buffers_.data() + i * kSlot, kSlot};
        messages_[i].msg_hdr = msghdr{};
        messages_[i].msg_hdr.msg_iov = &vectors_[i];
        messages_[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::recvmmsg(fd, messages_.data(), batch, MSG_DONTWAIT, nullptr);
      if (n <= 0) return;  // EAGAIN: drained
      for (int i = 0; i < n; ++i) {
        feed.on_datagram(buffers_.data() + static_cast<size_t>(i) * kSlot, messages_[i].msg_len);
      }
      if (static_cast<unsigned>(n) < batch) return;  // the queue was shorter than a batch
    }
  }

 private:
  std::vector<unsigned char> buffers_;
  std::vector<iovec> vectors_;
  std::vector<mmsghdr> messages_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* group = nullptr;
  const char* interface = "127.0.0.1";
  uint16_t port = 0;
  size_t batch = 64;
  int receive_buffer = 4 << 20;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-g") group = argv[i + 1];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-i") interface = argv[i + 1];
    if (flag == "-b") batch = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-r") receive_buffer = std::atoi(argv[i + 1]);
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
  }
  if (group == nullptr || port == 0 || batch == 0) {
    std::fprintf(stderr,
                 "usage: %s -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-b BATCH] [-r RCVBUF] "
                 "[-d SECONDS]\n",
                 argv[0]);
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const int fd = join_group(group, port, interface, receive_buffer);
  if (fd < 0) {
    std::perror("epoll_mcast_recv: bind/join");
    return 1;
  }
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event interest{};
  interest.events = EPOLLIN;
  interest.data.fd = fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &interest);
  Batched batched(batch);
  Feed feed;
  std::printf("joined %s:%u\n", group, port);
  std::fflush(stdout);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds > 0 ? seconds : 1e9));
  uint64_t wakeups = 0;
  while (!g_stop && Clock::now() < end) {
    epoll_event event;
    const int n = ::epoll_wait(epoll_fd, &event, 1, 100);
    if (n <= 0) continue;
    ++wakeups;
    batched.drain(fd, feed);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "received %llu gaps %llu missing %llu late %llu warmup %llu short %llu seconds %.3f "
      "wakeups %llu\n",
      static_cast<unsigned long long>(feed.received), static_cast<unsigned long long>(feed.gaps),
      static_cast<unsigned long long>(feed.missing), static_cast<unsigned long long>(feed.late),
      static_cast<unsigned long long>(feed.warmup), static_cast<unsigned long long>(feed.short_),
      elapsed, static_cast<unsigned long long>(wakeups));
  ::close(epoll_fd);
  ::close(fd);
  return 0;
}
