// mcast_send: the multicast sender of scripts/bench-mcast.sh. A plain socket, no UCP code, so
// that it feeds every receiver alike.
//
//   mcast_send -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-s SIZE] [-r RATE] [-d SECONDS]
//              [-t STREAM] [-q FIRST] [-z]
//
// Sends SIZE-byte datagrams (256) to GROUP:PORT out of the interface that has INTERFACE_ADDRESS
// (127.0.0.1, from which it also sends), for SECONDS (5). Each starts with its 64-bit
// big-endian sequence number: the top 8 bits STREAM (0; several senders to one group each take
// their own), the rest FIRST (1), FIRST + 1, ... (-z: number 0 in all, warm-up traffic that the
// receivers count apart). RATE datagrams a second (0, the default: flat out), paced against the
// clock: whenever datagrams are due, up to 64 go in one sendmmsg; otherwise it sleeps until
// the next is due. A datagram the kernel refuses (ENOBUFS) is counted, not sent again. At the
// end one line:
//   sent N refused E seconds S rate R last L
// (L the last sequence number sent, FIRST - 1 when none).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned kBatch = 64;

void put_sequence(unsigned char* to, uint64_t sequence) {
  for (int i = 7; i >= 0; --i, sequence >>= 8) to[i] = static_cast<unsigned char>(sequence);
}

}  // namespace

int main(int argc, char** argv) {
  const char* group = nullptr;
  const char* interface = "127.0.0.1";
  uint16_t port = 0;
  size_t size = 256;
  double rate = 0, seconds = 5;
  uint64_t first = 1, stream = 0;
  bool warmup = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-z") {
      warmup = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (flag == "-g") group = argv[i + 1];
    if (flag == "-p") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (flag == "-i") interface = argv[i + 1];
    if (flag == "-s") size = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (flag == "-r") rate = std::atof(argv[i + 1]);
    if (flag == "-d") seconds = std::atof(argv[i + 1]);
    if (flag == "-t") stream = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "-q") first = std::strtoull(argv[i + 1], nullptr, 10);
    ++i;
  }
  if (group == nullptr || port == 0 || size < 8 || size > 65507 || rate < 0 || first == 0 ||
      first >= (uint64_t{1} << 56) || stream > 255) {
    std::fprintf(stderr,
                 "usage: %s -g GROUP -p PORT [-i INTERFACE_ADDRESS] [-s SIZE>=8] [-r RATE] "
                 "[-d SECONDS] [-t STREAM<=255] [-q FIRST>=1] [-z]\n",
                 argv[0]);
    return 2;
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{}, from{};
  to.sin_family = from.sin_family = AF_INET;
  to.sin_port = htons(port);
  ip_mreqn out{};
  if (fd < 0 || ::inet_pton(AF_INET, group, &to.sin_addr) != 1 ||
      ::inet_pton(AF_INET, interface, &from.sin_addr) != 1) {
    std::fprintf(stderr, "mcast_send: bad group or interface address\n");
    return 2;
  }
  out.imr_address = from.sin_addr;
  const int loop = 1;
  if (::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof out) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    std::perror("mcast_send: socket setup");
    return 1;
  }
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // sleeps end when asked: even pacing

  std::vector<unsigned char> payloads(kBatch * size, 'm');
  std::vector<iovec> vectors(kBatch);
  std::vector<mmsghdr> messages(kBatch);
  for (unsigned i = 0; i < kBatch; ++i) {
    vectors[i] = {payloads.data() + i * size, size};
    messages[i].msg_hdr.msg_iov = &vectors[i];
    messages[i].msg_hdr.msg_iovlen = 1;
    put_sequence(payloads.data() + i * size, stream << 56);
  }
  uint64_t sequence = first, sent = 0, refused = 0;  // `sequence`: the next to send
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    uint64_t due = kBatch;
    if (rate > 0) {
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const auto owed = static_cast<uint64_t>(elapsed * rate) + 1;  // the first goes at once
      const uint64_t done = sent + refused;
      if (owed <= done) {
        // Sleep until the next one is due.
        const auto next = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(double(done) / rate));
        const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(next - now);
        timespec pause{static_cast<time_t>(wait.count() / 1'000'000'000),
                       static_cast<long>(wait.count() % 1'000'000'000)};
        ::nanosleep(&pause, nullptr);
        continue;
      }
      due = std::min<uint64_t>(owed - done, kBatch);
    }
    if (!warmup) {
      for (uint64_t i = 0; i < due; ++i)
        put_sequence(payloads.data() + i * size, stream << 56 | (sequence + i));
    }
    const int n = ::sendmmsg(fd, messages.data(), static_cast<unsigned>(due), 0);
    if (n < 0) {
      if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
        std::perror("mcast_send: sendmmsg");
        return 1;
      }
      ++refused;  // the first of the batch is lost: the next batch starts after it
      if (!warmup) ++sequence;
      continue;
    }
    sent += static_cast<uint64_t>(n);
    if (!warmup) sequence += static_cast<uint64_t>(n);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("sent %llu refused %llu seconds %.3f rate %.0f last %llu\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(refused),
              elapsed, double(sent) / elapsed,
              static_cast<unsigned long long>(warmup ? 0 : sequence - 1));
  ::close(fd);
  return 0;
}
