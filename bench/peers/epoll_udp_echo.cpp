// epoll_udp_echo: the UDP echo servers UCP's udp_echo is measured against
// (scripts/bench-udp.sh), one thread, one socket, level-triggered epoll.
//
//   epoll_udp_echo -p PORT [-m plain|mmsg] [-b BATCH] [-r RCVBUF]
//
// plain: on EPOLLIN, recvfrom until EAGAIN, each datagram straight back with sendto: two
//        system calls per datagram, the loop most UDP servers are.
// mmsg:  on EPOLLIN, recvmmsg up to BATCH (64) datagrams into their own buffers until EAGAIN,
//        and each batch back with one sendmmsg: the best a plain epoll loop can do.
// A datagram the socket will not take now (EAGAIN, ENOBUFS) is dropped, as UDP does. RCVBUF
// is SO_RCVBUF (default 4 MiB, UCP's server.udp_recv_buffer_bytes default; SO_RCVBUFFORCE
// when permitted). Nothing is printed per datagram. SIGINT/SIGTERM stop it.

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr size_t kMaxDatagram = 65536;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int bind_udp(uint16_t port, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer, sizeof receive_buffer) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Two system calls per datagram.
void serve_plain(int fd) {
  std::vector<char> buffer(kMaxDatagram);
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    const ssize_t n = ::recvfrom(fd, buffer.data(), buffer.size(), 0,
                                 reinterpret_cast<sockaddr*>(&peer), &peer_length);
    if (n < 0) return;  // EAGAIN: drained
    (void)::sendto(fd, buffer.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&peer),
                   peer_length);
  }
}

// One recvmmsg and one sendmmsg per batch.
class Batched {
 public:
  explicit Batched(size_t batch)
      : buffers_(batch * kMaxDatagram), vectors_(batch), peers_(batch), messages_(batch) {}

  void serve(int fd) {
    const auto batch = static_cast<unsigned>(messages_.size());
    for (;;) {
      for (unsigned i = 0; i < batch; ++i) {
        vectors_[i] = {buffers_.data() + i * kMaxDatagram, kMaxDatagram};
        messages_[i].msg_hdr = msghdr{};
        messages_[i].msg_hdr.msg_name = &peers_[i];
        messages_[i].msg_hdr.msg_namelen = sizeof peers_[i];
        messages_[i].msg_hdr.msg_iov = &vectors_[i];
        messages_[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = ::recvmmsg(fd, messages_.data(), batch, MSG_DONTWAIT, nullptr);
      if (n <= 0) return;  // EAGAIN: drained
      for (int i = 0; i < n; ++i) vectors_[i].iov_len = messages_[i].msg_len;
      for (int sent = 0; sent < n;) {
        const int m = ::sendmmsg(fd, messages_.data() + sent, static_cast<unsigned>(n - sent), 0);
        if (m < 0) {
          ++sent;  // this one refused (EAGAIN, ENOBUFS): dropped, the rest still go
          continue;
        }
        sent += m;
      }
      if (static_cast<unsigned>(n) < batch) return;  // the queue was shorter than a batch
    }
  }

 private:
  std::vector<char> buffers_;
  std::vector<iovec> vectors_;
  std::vector<sockaddr_storage> peers_;
  std::vector<mmsghdr> messages_;
};

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 0;
  std::string_view mode = "mmsg";
  size_t batch = 64;
  int receive_buffer = 4 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-m") mode = argv[i + 1];
    if (flag == "-b") batch = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-r") receive_buffer = std::atoi(argv[i + 1]);
  }
  if (port == 0 || (mode != "plain" && mode != "mmsg") || batch == 0) {
    std::fprintf(stderr, "usage: %s -p PORT [-m plain|mmsg] [-b BATCH] [-r RCVBUF]\n", argv[0]);
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const int fd = bind_udp(port, receive_buffer);
  if (fd < 0) {
    std::perror("bind");
    return 1;
  }
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event interest{};
  interest.events = EPOLLIN;
  interest.data.fd = fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &interest);
  Batched batched(batch);
  std::printf("epoll_udp_echo (%.*s) listening on 0.0.0.0:%u\n", static_cast<int>(mode.size()),
              mode.data(), port);
  std::fflush(stdout);
  while (!g_stop) {
    epoll_event event;
    const int n = ::epoll_wait(epoll_fd, &event, 1, 500);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (mode == "plain") {
      serve_plain(fd);
    } else {
      batched.serve(fd);
    }
  }
  ::close(epoll_fd);
  ::close(fd);
  return 0;
}
