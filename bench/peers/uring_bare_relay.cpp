// uring_bare_relay: the ceiling of the gateway benchmark: a bare, hand-written, single-thread
// liburing TCP relay to one upstream.
//
//   uring_bare_relay -p PORT -u UPSTREAM_PORT [-b BUFFER_SIZE] [-n BUFFER_COUNT] [-s PIPE_SIZE]
//
// What an L4 proxy on io_uring can at best do on one core, so that the report shows the UCP
// gateway's cost against it. No balancing, no timers, no health, no half-close (either side's
// EOF or error closes both), no abstraction beyond what the kernel interface needs:
//   - one ring, IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (COOP_TASKRUN on older kernels);
//   - multishot accept; per accepted client an IORING_OP_CONNECT to 127.0.0.1:UPSTREAM_PORT;
//   - per socket one multishot recv picking buffers from one provided buffer ring (registered
//     by hand: liburing 2.3 has no io_uring_setup_buf_ring);
//   - each received buffer is sent as it is (no copy) on the other socket, one send in flight
//     per socket, later buffers queued behind it in order; a buffer returns to the ring when
//     its send is done;
//   - one io_uring_submit_and_wait per loop iteration for every socket's SQEs, all ready CQEs
//     reaped in one walk, the CQ head and the buffer ring tail each advanced once.
// With -s PIPE_SIZE it relays by splice instead (the measurement behind docs/gateway.md,
// "Splice"): per socket a pipe of PIPE_SIZE bytes, IORING_OP_SPLICE from the socket into it and
// from it to the other socket, one of each in flight per direction; the bytes never reach user
// memory (the kernel moves page references), and io_uring runs each splice in an io-wq worker.
// SIGINT/SIGTERM stop it.

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr unsigned kSqEntries = 4096;
constexpr unsigned kCqEntries = 65536;
constexpr uint16_t kBufferGroup = 0;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// user_data: operation in the high 32 bits, fd in the low 32. An fd is closed only when no
// operation on it is in flight, so a recycled fd never receives a stale CQE.
enum class Op : uint64_t {
  kAccept = 1,
  kRecv = 2,
  kSend = 3,
  kConnect = 4,
  kSpliceIn = 5,
  kSpliceOut = 6
};
uint64_t user_data(Op op, int fd) noexcept {
  return (static_cast<uint64_t>(op) << 32) | static_cast<uint32_t>(fd);
}

/// A buffer received on the partner socket, waiting to be (or being) sent on this one.
struct PendingSend {
  uint16_t buffer_id;
  uint32_t offset;
  uint32_t length;
};

struct Socket {
  bool open = false;
  bool connecting = false;      // the upstream's connect is in flight
  bool recv_armed = false;      // the multishot recv has not posted its final CQE
  bool send_in_flight = false;  // one send at a time keeps the bytes in order
  bool closing = false;
  bool needs_rearm = false;  // its recv ended with ENOBUFS
  int partner = -1;
  std::vector<PendingSend> queue;  // [head, end): the front is the one in flight
  size_t head = 0;
  // Splice mode: this socket's bytes go through its own pipe to the partner.
  int pipe_read = -1;
  int pipe_write = -1;
  uint32_t in_pipe = 0;  // bytes spliced in and not yet out
  bool splice_in_flight = false;
  bool splice_out_flight = false;
};

class RelayLoop {
 public:
  RelayLoop(unsigned buffer_count, unsigned buffer_size, uint16_t upstream_port, unsigned pipe_size)
      : buffer_count_(buffer_count), buffer_size_(buffer_size), pipe_size_(pipe_size) {
    upstream_.sin_family = AF_INET;
    upstream_.sin_port = htons(upstream_port);
    upstream_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  RelayLoop(const RelayLoop&) = delete;
  RelayLoop& operator=(const RelayLoop&) = delete;
  ~RelayLoop() {
    for (size_t fd = 0; fd < sockets_.size(); ++fd) {
      if (sockets_[fd].open) ::close(static_cast<int>(fd));
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (buffer_ring_ != nullptr) munmap(buffer_ring_, buffer_count_ * sizeof(io_uring_buf));
    if (buffers_ != nullptr) munmap(buffers_, size_t{buffer_count_} * buffer_size_);
  }

  bool init(uint16_t port) { return setup_ring() && setup_buffer_ring() && listen_on(port); }
  const char* mode() const noexcept { return mode_; }

  int run() {
    arm_accept();
    while (g_stop == 0) {
      for (const int fd : rearm_) {  // after ENOBUFS; buffers were returned since
        Socket& s = at(fd);
        if (s.needs_rearm) arm_recv(fd);
        s.needs_rearm = false;
      }
      rearm_.clear();
      const int ret = io_uring_submit_and_wait(&ring_, 1);
      if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
        std::fprintf(stderr, "uring_bare_relay: io_uring_submit_and_wait: %s\n",
                     std::strerror(-ret));
        return 1;
      }
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        on_cqe(*cqe);
      }
      io_uring_cq_advance(&ring_, seen);
      if (recycled_ != 0) {
        io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(recycled_));
        recycled_ = 0;
      }
    }
    return 0;
  }

 private:
  bool setup_ring() {
    struct Attempt {
      unsigned flags;
      const char* name;
    };
    const Attempt attempts[] = {
        {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, "SINGLE_ISSUER|DEFER_TASKRUN"},
        {IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},
        {0, "plain"},
    };
    for (const Attempt& attempt : attempts) {
      io_uring_params params{};
      params.flags = attempt.flags | IORING_SETUP_CQSIZE;
      params.cq_entries = kCqEntries;
      const int ret = io_uring_queue_init_params(kSqEntries, &ring_, &params);
      if (ret == 0) {
        ring_ready_ = true;
        mode_ = attempt.name;
        io_uring_register_ring_fd(&ring_);
        return true;
      }
      if (ret != -EINVAL) {
        std::fprintf(stderr, "uring_bare_relay: io_uring_queue_init: %s\n", std::strerror(-ret));
        return false;
      }
    }
    return false;
  }

  bool setup_buffer_ring() {
    const size_t ring_bytes = buffer_count_ * sizeof(io_uring_buf);
    void* ring_memory =
        mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    void* buffer_memory =
        mmap(nullptr, size_t{buffer_count_} * buffer_size_, PROT_READ | PROT_WRITE,
             MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
    if (ring_memory == MAP_FAILED || buffer_memory == MAP_FAILED) {
      std::perror("uring_bare_relay: mmap");
      return false;
    }
    buffer_ring_ = static_cast<io_uring_buf_ring*>(ring_memory);
    buffers_ = static_cast<char*>(buffer_memory);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<uint64_t>(ring_memory);
    registration.ring_entries = buffer_count_;
    registration.bgid = kBufferGroup;
    const int ret = io_uring_register_buf_ring(&ring_, &registration, 0);
    if (ret != 0) {
      std::fprintf(stderr, "uring_bare_relay: io_uring_register_buf_ring: %s\n",
                   std::strerror(-ret));
      return false;
    }
    io_uring_buf_ring_init(buffer_ring_);
    const int mask = io_uring_buf_ring_mask(buffer_count_);
    for (unsigned id = 0; id < buffer_count_; ++id) {
      io_uring_buf_ring_add(buffer_ring_, buffer(static_cast<uint16_t>(id)), buffer_size_,
                            static_cast<unsigned short>(id), mask, static_cast<int>(id));
    }
    io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(buffer_count_));
    return true;
  }

  bool listen_on(uint16_t port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return false;
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        listen(listen_fd_, SOMAXCONN) != 0) {
      std::fprintf(stderr, "uring_bare_relay: cannot listen on port %u: %s\n", port,
                   std::strerror(errno));
      return false;
    }
    return true;
  }

  char* buffer(uint16_t id) const noexcept { return buffers_ + size_t{id} * buffer_size_; }

  Socket& at(int fd) {
    const auto index = static_cast<size_t>(fd);
    if (index >= sockets_.size()) sockets_.resize(std::max(index + 1, 2 * index));
    return sockets_[index];
  }

  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // SQ full: hand this batch to the kernel now, then go on
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_accept() {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_multishot_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, user_data(Op::kAccept, listen_fd_));
  }

  void arm_recv(int fd) {
    Socket& s = at(fd);
    if (!s.open || s.closing) return;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, user_data(Op::kRecv, fd));
    s.recv_armed = true;
  }

  void send_front(int fd, Socket& s) {
    const PendingSend& front = s.queue[s.head];
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_send(sqe, fd, buffer(front.buffer_id) + front.offset, front.length - front.offset,
                       MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, user_data(Op::kSend, fd));
    s.send_in_flight = true;
  }

  void recycle(uint16_t id) {
    io_uring_buf_ring_add(buffer_ring_, buffer(id), buffer_size_, id,
                          io_uring_buf_ring_mask(buffer_count_), static_cast<int>(recycled_++));
  }

  void on_cqe(const io_uring_cqe& cqe) {
    const auto op = static_cast<Op>(cqe.user_data >> 32);
    const auto fd = static_cast<int>(cqe.user_data & 0xffffffffu);
    const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
    switch (op) {
      case Op::kAccept:
        if (cqe.res >= 0) on_accepted(cqe.res);
        if (!more && g_stop == 0) arm_accept();
        break;
      case Op::kConnect:
        on_connected(fd, cqe.res);
        break;
      case Op::kRecv:
        on_recv(fd, cqe.res, cqe.flags, more);
        break;
      case Op::kSend:
        on_sent(fd, cqe.res);
        break;
      case Op::kSpliceIn:
        on_spliced_in(fd, cqe.res);
        break;
      case Op::kSpliceOut:
        on_spliced_out(fd, cqe.res);
        break;
    }
  }

  // ---- splice mode ----

  bool open_pipe(Socket& s) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(pipe_size_));
    s.pipe_read = fds[0];
    s.pipe_write = fds[1];
    return true;
  }

  void splice_in(int fd) {
    Socket& s = at(fd);
    if (s.closing) return;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_splice(sqe, fd, -1, s.pipe_write, -1, pipe_size_, SPLICE_F_MOVE);
    io_uring_sqe_set_data64(sqe, user_data(Op::kSpliceIn, fd));
    s.splice_in_flight = true;
  }

  void splice_out(int fd) {
    Socket& s = at(fd);
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_splice(sqe, s.pipe_read, -1, s.partner, -1, s.in_pipe, SPLICE_F_MOVE);
    io_uring_sqe_set_data64(sqe, user_data(Op::kSpliceOut, fd));
    s.splice_out_flight = true;
  }

  void on_spliced_in(int fd, int res) {
    Socket& s = at(fd);
    s.splice_in_flight = false;
    if (res > 0 && !s.closing) {
      s.in_pipe = static_cast<uint32_t>(res);
      splice_out(fd);
    } else if (!s.closing) {
      close_pair(fd);
    }
    maybe_finish_close(fd);
  }

  void on_spliced_out(int fd, int res) {
    Socket& s = at(fd);
    s.splice_out_flight = false;
    if (res > 0 && !s.closing) {
      s.in_pipe -= static_cast<uint32_t>(res);
      if (s.in_pipe > 0) {
        splice_out(fd);
      } else {
        splice_in(fd);
      }
    } else if (!s.closing) {
      close_pair(fd);
    }
    maybe_finish_close(fd);
  }

  void open_socket(int fd, int partner) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Socket& s = at(fd);
    s = Socket{};
    s.open = true;
    s.partner = partner;
  }

  void on_accepted(int client) {
    const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (upstream < 0) {
      ::close(client);
      return;
    }
    open_socket(client, upstream);
    open_socket(upstream, client);
    at(upstream).connecting = true;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_connect(sqe, upstream, reinterpret_cast<const sockaddr*>(&upstream_),
                          sizeof upstream_);
    io_uring_sqe_set_data64(sqe, user_data(Op::kConnect, upstream));
  }

  void on_connected(int upstream, int res) {
    Socket& s = at(upstream);
    s.connecting = false;
    if (res < 0) {
      close_pair(upstream);
      return;
    }
    if (pipe_size_ != 0) {
      // A splice from a non-blocking socket fails with EAGAIN instead of waiting (io_uring does
      // not poll for it): the io-wq worker blocks in it instead.
      fcntl(upstream, F_SETFL, fcntl(upstream, F_GETFL) & ~O_NONBLOCK);
      if (!open_pipe(s) || !open_pipe(at(s.partner))) {
        close_pair(upstream);
        return;
      }
      splice_in(upstream);
      splice_in(s.partner);
      return;
    }
    arm_recv(upstream);
    arm_recv(s.partner);
  }

  void on_recv(int fd, int res, uint32_t flags, bool more) {
    Socket& s = at(fd);
    if (!more) s.recv_armed = false;
    if (res > 0) {
      const auto id = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      Socket& to = at(s.partner);
      if (s.closing || to.closing) {
        recycle(id);
      } else {
        to.queue.push_back({id, 0, static_cast<uint32_t>(res)});
        if (!to.send_in_flight) send_front(s.partner, to);
      }
      if (!more) arm_recv(fd);
    } else if (res == -ENOBUFS) {
      s.needs_rearm = true;
      rearm_.push_back(fd);
    } else if (!s.closing) {  // EOF or an error: this relay has no half-close, both sides go
      close_pair(fd);
    }
    maybe_finish_close(fd);
  }

  void on_sent(int fd, int res) {
    Socket& s = at(fd);
    s.send_in_flight = false;
    if (res < 0) {
      if (!s.closing) close_pair(fd);
    } else if (!s.closing) {
      PendingSend& front = s.queue[s.head];
      front.offset += static_cast<uint32_t>(res);
      if (front.offset == front.length) {
        recycle(front.buffer_id);
        if (++s.head == s.queue.size()) {
          s.queue.clear();
          s.head = 0;
        }
      }
      if (s.head < s.queue.size()) send_front(fd, s);
    }
    maybe_finish_close(fd);
  }

  // Both sides begin closing together, so a side still open always has its partner: once
  // closing, a side never looks at its partner again (that fd number may serve another
  // connection by then).
  void close_pair(int fd) {
    const int partner = at(fd).partner;
    begin_close(fd);
    begin_close(partner);
  }

  void begin_close(int fd) {
    Socket& s = at(fd);
    if (!s.open || s.closing) return;
    s.closing = true;
    for (size_t i = s.head + (s.send_in_flight ? 1 : 0); i < s.queue.size(); ++i) {
      recycle(s.queue[i].buffer_id);
    }
    s.queue.resize(s.head + (s.send_in_flight ? 1 : 0));
    // Makes the multishot recv post its last CQE, and a splice blocked on the socket return.
    if (s.recv_armed || s.splice_in_flight || s.splice_out_flight) shutdown(fd, SHUT_RDWR);
    maybe_finish_close(fd);
  }

  void maybe_finish_close(int fd) {
    Socket& s = at(fd);
    if (!s.closing || s.recv_armed || s.send_in_flight || s.connecting) return;
    if (s.splice_in_flight || s.splice_out_flight) return;
    if (s.head < s.queue.size()) recycle(s.queue[s.head].buffer_id);  // a failed send's buffer
    if (s.pipe_read >= 0) ::close(s.pipe_read);
    if (s.pipe_write >= 0) ::close(s.pipe_write);
    s = Socket{};
    ::close(fd);
  }

  const unsigned buffer_count_;
  const unsigned buffer_size_;
  const unsigned pipe_size_;  // 0: relay through the buffer ring
  sockaddr_in upstream_{};
  io_uring ring_{};
  bool ring_ready_ = false;
  const char* mode_ = "";
  io_uring_buf_ring* buffer_ring_ = nullptr;
  char* buffers_ = nullptr;
  unsigned recycled_ = 0;
  int listen_fd_ = -1;
  std::vector<Socket> sockets_;  // indexed by fd
  std::vector<int> rearm_;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: uring_bare_relay -p PORT -u UPSTREAM_PORT [-b BUFFER_SIZE (4096)] "
               "[-n BUFFER_COUNT (8192, a power of two <= 32768)] [-s PIPE_SIZE (splice)]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0;
  long upstream = 0;
  long buffer_size = 4096;
  long buffer_count = 8192;
  long pipe_size = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "-p") {
      port = value;
    } else if (flag == "-u") {
      upstream = value;
    } else if (flag == "-b") {
      buffer_size = value;
    } else if (flag == "-n") {
      buffer_count = value;
    } else if (flag == "-s") {
      pipe_size = value;
    } else {
      usage();
    }
  }
  const bool power_of_two = buffer_count > 0 && (buffer_count & (buffer_count - 1)) == 0;
  if (argc % 2 == 0 || port <= 0 || port > 65535 || upstream <= 0 || upstream > 65535 ||
      buffer_size < 64 || buffer_size > (1 << 20) || !power_of_two || buffer_count > 32768 ||
      pipe_size < 0 || pipe_size > (1 << 20)) {
    usage();
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  RelayLoop loop(static_cast<unsigned>(buffer_count), static_cast<unsigned>(buffer_size),
                 static_cast<uint16_t>(upstream), static_cast<unsigned>(pipe_size));
  if (!loop.init(static_cast<uint16_t>(port))) return 1;
  if (pipe_size != 0) {
    std::fprintf(stderr,
                 "uring_bare_relay: port %ld -> 127.0.0.1:%ld, %s, splice through pipes "
                 "of %ld B\n",
                 port, upstream, loop.mode(), pipe_size);
  } else {
    std::fprintf(stderr, "uring_bare_relay: port %ld -> 127.0.0.1:%ld, %s, %ld buffers of %ld B\n",
                 port, upstream, loop.mode(), buffer_count, buffer_size);
  }
  return loop.run();
}
