// udp_load: the UDP echo load generator of scripts/bench-udp.sh. Plain sockets and epoll, no
// UCP code, so that it loads every server alike.
//
//   udp_load -p PORT [-c CLIENTS] [-w WINDOW] [-s SIZE] [-d SECONDS]
//
// CLIENTS connected UDP sockets (100), each keeping WINDOW datagrams of SIZE bytes (4, 256) in
// flight: every echo received sends the next, received and sent with recvmmsg/sendmmsg per
// socket. A socket that hears nothing for 100 ms (its datagrams lost under overload) refills its
// window. Every echo is checked for its size and first byte. At the end one line:
//   echoes N lost_refills R bad B seconds S
// (N echoes received in S seconds of load).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned kBatch = 64;

struct Client {
  int fd = -1;
  unsigned in_flight = 0;
  Clock::time_point last_heard;
};

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 0;
  size_t clients = 100, window = 4, size = 256;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-c") clients = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-w") window = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-s") size = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
  }
  if (port == 0 || clients == 0 || window == 0 || window > kBatch || size == 0 || size > 65507) {
    std::fprintf(stderr, "usage: %s -p PORT [-c CLIENTS] [-w WINDOW<=64] [-s SIZE] [-d SECONDS]\n",
                 argv[0]);
    return 2;
  }
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Client> all(clients);
  for (size_t i = 0; i < clients; ++i) {
    all[i].fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int bytes = 1 << 20;
    ::setsockopt(all[i].fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (all[i].fd < 0 ||
        ::connect(all[i].fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
      std::perror("socket/connect");
      return 1;
    }
    epoll_event interest{};
    interest.events = EPOLLIN;
    interest.data.u64 = i;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, all[i].fd, &interest);
  }
  std::vector<char> payload(size, 'u');
  std::vector<char> receive(kBatch * 2048);
  std::vector<iovec> send_vectors(kBatch, iovec{payload.data(), size});
  std::vector<mmsghdr> sends(kBatch);
  for (unsigned i = 0; i < kBatch; ++i) {
    sends[i].msg_hdr.msg_iov = &send_vectors[i];
    sends[i].msg_hdr.msg_iovlen = 1;
  }
  std::vector<iovec> receive_vectors(kBatch);
  std::vector<mmsghdr> receives(kBatch);
  auto send_some = [&](Client& c, unsigned count) {
    const int sent = ::sendmmsg(c.fd, sends.data(), count, 0);
    if (sent > 0) c.in_flight += static_cast<unsigned>(sent);
  };
  uint64_t echoes = 0, refills = 0, bad = 0;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (Client& c : all) {
    c.last_heard = start;
    send_some(c, static_cast<unsigned>(window));
  }
  auto next_check = start + std::chrono::milliseconds(100);
  std::vector<epoll_event> events(1024);
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    if (now >= next_check) {
      for (Client& c : all) {
        if (now - c.last_heard > std::chrono::milliseconds(100)) {
          c.in_flight = 0;  // lost: start the window again
          c.last_heard = now;
          ++refills;
          send_some(c, static_cast<unsigned>(window));
        }
      }
      next_check = now + std::chrono::milliseconds(100);
    }
    const int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 10);
    for (int e = 0; e < n; ++e) {
      Client& c = all[events[e].data.u64];
      for (unsigned i = 0; i < kBatch; ++i) {
        receive_vectors[i] = {receive.data() + i * 2048, 2048};
        receives[i].msg_hdr = msghdr{};
        receives[i].msg_hdr.msg_iov = &receive_vectors[i];
        receives[i].msg_hdr.msg_iovlen = 1;
      }
      const int got = ::recvmmsg(c.fd, receives.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (got <= 0) continue;
      for (int i = 0; i < got; ++i) {
        if (receives[i].msg_len != size || receive[static_cast<size_t>(i) * 2048] != 'u') ++bad;
      }
      echoes += static_cast<uint64_t>(got);
      c.last_heard = Clock::now();
      c.in_flight = c.in_flight > static_cast<unsigned>(got) ? c.in_flight - got : 0;
      const unsigned room = static_cast<unsigned>(window) - std::min(c.in_flight, unsigned(window));
      if (room > 0) send_some(c, room);
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("echoes %llu lost_refills %llu bad %llu seconds %.3f\n",
              static_cast<unsigned long long>(echoes), static_cast<unsigned long long>(refills),
              static_cast<unsigned long long>(bad), elapsed);
  for (Client& c : all) ::close(c.fd);
  ::close(epoll_fd);
  return bad == 0 ? 0 : 1;
}
