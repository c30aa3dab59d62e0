// uring_bare_mcast_recv: the ceiling of a multicast receiver on io_uring (scripts/bench-mcast.sh,
// receiver `bare`): one thread, one socket joined to the group exactly as epoll_mcast_recv's,
// and on it one multishot recvmsg that fills buffers from a provided-buffer ring (registered by
// hand: liburing 2.3 has no io_uring_setup_buf_ring); one io_uring_submit_and_wait per loop
// iteration, every ready completion reaped in one walk, the buffer ring's tail advanced once.
// SINGLE_ISSUER | DEFER_TASKRUN (COOP_TASKRUN before 6.1). No abstraction beyond what the kernel
// interface needs: what UCP's receive path costs is measured against it.
//
//   uring_bare_mcast_recv -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-n BUFFERS] [-r RCVBUF]
//                         [-a NAME_BYTES] [-d SECONDS]
//
// BUFFERS: 4 KiB buffers in the ring (default 256, the working set a UCP loop offers at first;
// a power of two <= 32768). NAME_BYTES (default 0, at most 128): room for the source address in
// front of each datagram, as UCP asks for (32): the kernel then writes it per datagram. The
// datagrams' sequence numbers are checked as epoll_mcast_recv
// checks them, and it prints the same lines: "joined GROUP:PORT" once joined and, at exit
// (SIGINT/SIGTERM, or after SECONDS):
//   received N gaps G missing M late L warmup W short B seconds S wakeups K
// (K: waits after which completions were there).

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr unsigned kSlot = 4096;  // the size of UCP's loop buffers
constexpr uint16_t kGroupId = 1;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Sequence numbers per stream, as epoll_mcast_recv counts them.
struct Feed {
  static constexpr uint64_t kNumberMask = (uint64_t{1} << 56) - 1;
  std::array<uint64_t, 256> next{};
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
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
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

class Receiver {
 public:
  Receiver(int fd, unsigned buffer_count, unsigned name_bytes)
      : fd_(fd), buffer_count_(buffer_count) {
    header_.msg_namelen = name_bytes;
  }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;
  ~Receiver() {
    if (ring_ready_) io_uring_queue_exit(&ring_);  // also unregisters the buffer ring
    if (buffer_ring_ != nullptr) munmap(buffer_ring_, buffer_count_ * sizeof(io_uring_buf));
    if (buffers_ != nullptr) munmap(buffers_, size_t{buffer_count_} * kSlot);
  }

  bool init() { return setup_ring() && setup_buffer_ring(); }

  // Receives until stopped or `end`; false on an error of the ring.
  bool run(Feed& feed, std::chrono::steady_clock::time_point end) {
    arm();
    __kernel_timespec tick{0, 100'000'000};  // to look at the clock and the stop flag
    while (g_stop == 0 && std::chrono::steady_clock::now() < end) {
      if (rearm_) arm();
      rearm_ = false;
      io_uring_cqe* first = nullptr;
      const int ret = io_uring_submit_and_wait_timeout(&ring_, &first, 1, &tick, nullptr);
      if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
        std::fprintf(stderr, "uring_bare_mcast_recv: io_uring_enter: %s\n", std::strerror(-ret));
        return false;
      }
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        if (!on_cqe(*cqe, feed)) return false;
      }
      if (seen != 0) ++wakeups_;
      io_uring_cq_advance(&ring_, seen);
      if (recycled_ != 0) {
        io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(recycled_));
        recycled_ = 0;
      }
    }
    return true;
  }

  uint64_t wakeups() const noexcept { return wakeups_; }

 private:
  bool setup_ring() {
    struct Attempt {
      unsigned flags;
    };
    const Attempt attempts[] = {{IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN},
                                {IORING_SETUP_COOP_TASKRUN}};
    for (const Attempt& attempt : attempts) {
      io_uring_params params{};
      params.flags = attempt.flags | IORING_SETUP_CQSIZE;
      params.cq_entries = 4 * buffer_count_;
      if (io_uring_queue_init_params(64, &ring_, &params) == 0) {
        ring_ready_ = true;
        io_uring_register_ring_fd(&ring_);
        return true;
      }
    }
    std::fprintf(stderr, "uring_bare_mcast_recv: io_uring_queue_init failed\n");
    return false;
  }

  bool setup_buffer_ring() {
    const size_t ring_bytes = buffer_count_ * sizeof(io_uring_buf);
    void* ring_memory =
        mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    void* buffer_memory = mmap(nullptr, size_t{buffer_count_} * kSlot, PROT_READ | PROT_WRITE,
                               MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
    if (ring_memory == MAP_FAILED || buffer_memory == MAP_FAILED) {
      std::perror("uring_bare_mcast_recv: mmap");
      return false;
    }
    buffer_ring_ = static_cast<io_uring_buf_ring*>(ring_memory);
    buffers_ = static_cast<unsigned char*>(buffer_memory);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<uint64_t>(ring_memory);
    registration.ring_entries = buffer_count_;
    registration.bgid = kGroupId;
    if (const int ret = io_uring_register_buf_ring(&ring_, &registration, 0); ret < 0) {
      std::fprintf(stderr, "uring_bare_mcast_recv: io_uring_register_buf_ring: %s\n",
                   std::strerror(-ret));
      return false;
    }
    io_uring_buf_ring_init(buffer_ring_);
    const int mask = io_uring_buf_ring_mask(buffer_count_);
    for (unsigned i = 0; i < buffer_count_; ++i) {
      io_uring_buf_ring_add(buffer_ring_, buffers_ + size_t{i} * kSlot, kSlot,
                            static_cast<unsigned short>(i), mask, static_cast<int>(i));
    }
    io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(buffer_count_));
    return true;
  }

  void arm() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_recvmsg_multishot(sqe, fd_, &header_, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kGroupId;
  }

  bool on_cqe(const io_uring_cqe& cqe, Feed& feed) {
    if (cqe.res < 0) {
      if (cqe.res == -ENOBUFS) {  // buffers come back this iteration; armed again after it
        rearm_ = true;
        return true;
      }
      std::fprintf(stderr, "uring_bare_mcast_recv: recvmsg: %s\n", std::strerror(-cqe.res));
      return false;
    }
    if ((cqe.flags & IORING_CQE_F_BUFFER) != 0) {
      const auto id = static_cast<unsigned short>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
      unsigned char* buffer = buffers_ + size_t{id} * kSlot;
      auto* out = io_uring_recvmsg_validate(buffer, cqe.res, &header_);
      if (out != nullptr) {
        feed.on_datagram(static_cast<const unsigned char*>(io_uring_recvmsg_payload(out, &header_)),
                         io_uring_recvmsg_payload_length(out, cqe.res, &header_));
      }
      io_uring_buf_ring_add(buffer_ring_, buffer, kSlot, id, io_uring_buf_ring_mask(buffer_count_),
                            static_cast<int>(recycled_++));
    }
    if ((cqe.flags & IORING_CQE_F_MORE) == 0) rearm_ = true;
    return true;
  }

  int fd_;
  unsigned buffer_count_;
  io_uring ring_{};
  bool ring_ready_ = false;
  io_uring_buf_ring* buffer_ring_ = nullptr;
  unsigned char* buffers_ = nullptr;
  msghdr header_{};  // no control data; the source address only with -a
  unsigned recycled_ = 0;
  bool rearm_ = false;
  uint64_t wakeups_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const char* group = nullptr;
  const char* interface = "127.0.0.1";
  uint16_t port = 0;
  long buffers = 256;
  long name_bytes = 0;
  int receive_buffer = 4 << 20;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-g") group = argv[i + 1];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-i") interface = argv[i + 1];
    if (flag == "-n") buffers = std::atol(argv[i + 1]);
    if (flag == "-a") name_bytes = std::atol(argv[i + 1]);
    if (flag == "-r") receive_buffer = std::atoi(argv[i + 1]);
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
  }
  const bool power_of_two = buffers > 0 && (buffers & (buffers - 1)) == 0;
  if (group == nullptr || port == 0 || !power_of_two || buffers > 32768 || name_bytes < 0 ||
      name_bytes > 128) {
    std::fprintf(stderr,
                 "usage: %s -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-n BUFFERS (256, a power of "
                 "two <= 32768)] [-r RCVBUF] [-a NAME_BYTES (0..128)] [-d SECONDS]\n",
                 argv[0]);
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = on_signal;  // no SA_RESTART: a wait in io_uring_enter returns -EINTR
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const int fd = join_group(group, port, interface, receive_buffer);
  if (fd < 0) {
    std::perror("uring_bare_mcast_recv: bind/join");
    return 1;
  }
  Feed feed;
  int status = 0;
  double elapsed = 0;
  uint64_t wakeups = 0;
  {
    Receiver receiver(fd, static_cast<unsigned>(buffers), static_cast<unsigned>(name_bytes));
    if (!receiver.init()) {
      ::close(fd);
      return 1;
    }
    std::printf("joined %s:%u\n", group, port);
    std::fflush(stdout);
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds > 0 ? seconds : 1e9));
    if (!receiver.run(feed, end)) status = 1;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    wakeups = receiver.wakeups();
  }
  std::printf(
      "received %llu gaps %llu missing %llu late %llu warmup %llu short %llu seconds %.3f "
      "wakeups %llu\n",
      static_cast<unsigned long long>(feed.received), static_cast<unsigned long long>(feed.gaps),
      static_cast<unsigned long long>(feed.missing), static_cast<unsigned long long>(feed.late),
      static_cast<unsigned long long>(feed.warmup), static_cast<unsigned long long>(feed.short_),
      elapsed, static_cast<unsigned long long>(wakeups));
  ::close(fd);
  return status;
}
