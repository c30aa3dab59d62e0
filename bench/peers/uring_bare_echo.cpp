// uring_bare_echo: the ceiling: a bare, hand-written, single-thread liburing echo loop.
//
//   uring_bare_echo -p PORT [-b BUFFER_SIZE] [-n BUFFER_COUNT] [-m echo|http] [-s SPIN_US]
//
// -m http answers every request (each blank line that ends a head; requests without a body,
// as wrk sends them) with a canned 200 of the size UCP's and nginx's pingpong answers have:
// the ceiling of an HTTP pingpong on io_uring, with no parsing at all.
//
// -s SPIN_US: before sleeping, look for completions (io_uring_enter without waiting) for up to
// SPIN_US microseconds: the ceiling of a busy-polling loop, beside UCP's event_loop.busy_poll_us.
//
// What a framework on io_uring can at best reach on one core, so every report shows UCP's cost
// against it. No abstraction beyond what the kernel interface needs:
//   - one ring, IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (COOP_TASKRUN on older kernels): the
//     kernel runs completion work only when we enter it, in our context, without IPIs;
//   - multishot accept, and per connection one multishot recv that picks buffers from a provided
//     buffer ring (registered by hand: liburing 2.3 has no io_uring_setup_buf_ring);
//   - each received buffer is sent back as it is (no copy), one send in flight per connection,
//     later buffers queued behind it in order; a buffer returns to the ring when its send is done;
//   - one io_uring_submit_and_wait per loop iteration (registered ring fd) for every connection's
//   SQEs, all ready CQEs
//     reaped in one walk, the CQ head and the buffer ring tail each advanced once.
// Nothing is printed per request. SIGINT/SIGTERM stop it.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr unsigned kSqEntries = 4096;
constexpr unsigned kCqEntries = 65536;  // 10,000 connections' recv and send CQEs fit at once
constexpr uint16_t kBufferGroup = 0;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// user_data: operation in the high 32 bits, fd in the low 32. An fd is closed only when no
// operation on it is in flight, so a recycled fd never receives a stale CQE.
enum class Op : uint64_t { kAccept = 1, kRecv = 2, kSend = 3 };
uint64_t user_data(Op op, int fd) noexcept {
  return (static_cast<uint64_t>(op) << 32) | static_cast<uint32_t>(fd);
}

/// A received buffer waiting to be (or being) sent back.
struct PendingSend {
  uint16_t buffer_id;
  uint32_t offset;  // bytes of it already sent
  uint32_t length;
};

struct Connection {
  bool open = false;
  bool recv_armed = false;         // the multishot recv has not posted its final CQE
  bool send_in_flight = false;     // one send at a time keeps the bytes in order
  bool closing = false;            // EOF or error: close once nothing is in flight
  bool needs_rearm = false;        // its recv ended with ENOBUFS; re-armed next iteration
  std::vector<PendingSend> queue;  // FIFO [head, end): front is the one in flight
  size_t head = 0;
  // -m http: how far into "\r\n\r\n" the bytes received so far end, answers owed, and the
  // answers' bytes in the send in flight (sent from the canned text).
  uint8_t matched = 0;
  uint32_t answers_owed = 0;
  uint32_t answer_bytes = 0;
  uint32_t answer_sent = 0;
};

// The pingpong answer, as long as UCP's (with its Date and Server headers) and nginx's.
constexpr std::string_view kAnswer =
    "HTTP/1.1 200 OK\r\nServer: bare\r\nDate: Wed, 25 Nov 2026 00:00:00 GMT\r\n"
    "Content-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n";
constexpr uint32_t kAnswersPerSend = 64;

class EchoLoop {
 public:
  EchoLoop(unsigned buffer_count, unsigned buffer_size, bool http)
      : buffer_count_(buffer_count), buffer_size_(buffer_size), http_(http) {
    for (uint32_t i = 0; i < kAnswersPerSend; ++i) answers_.append(kAnswer);
  }
  EchoLoop(const EchoLoop&) = delete;
  EchoLoop& operator=(const EchoLoop&) = delete;
  ~EchoLoop() {
    for (size_t fd = 0; fd < connections_.size(); ++fd) {
      if (connections_[fd].open) ::close(static_cast<int>(fd));
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (ring_ready_) io_uring_queue_exit(&ring_);  // also unregisters the buffer ring
    if (buffer_ring_ != nullptr) munmap(buffer_ring_, buffer_count_ * sizeof(io_uring_buf));
    if (buffers_ != nullptr) munmap(buffers_, size_t{buffer_count_} * buffer_size_);
  }

  bool init(uint16_t port) { return setup_ring() && setup_buffer_ring() && listen_on(port); }

  const char* mode() const noexcept { return mode_; }
  void set_spin(std::chrono::microseconds spin) noexcept { spin_ = spin; }

  int run() {
    arm_accept();
    while (g_stop == 0) {
      for (const int fd : rearm_) {  // after ENOBUFS; buffers were returned since
        Connection& conn = connections_[static_cast<size_t>(fd)];
        if (conn.needs_rearm) arm_recv(fd);
        conn.needs_rearm = false;
      }
      rearm_.clear();
      const int ret =
          spin_.count() > 0 && spin_for_completions() ? 0 : io_uring_submit_and_wait(&ring_, 1);
      if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
        std::fprintf(stderr, "uring_bare_echo: io_uring_submit_and_wait: %s\n",
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
  // True when completions arrived within the spin (the SQEs are submitted either way).
  bool spin_for_completions() {
    const auto spin_end = std::chrono::steady_clock::now() + spin_;
    do {
      // With DEFER_TASKRUN completions are posted only while we are in the kernel asking.
      const int ret = io_uring_submit_and_get_events(&ring_);
      if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) return false;
      if (io_uring_cq_ready(&ring_) > 0) return true;
    } while (g_stop == 0 && std::chrono::steady_clock::now() < spin_end);
    return false;
  }

  bool setup_ring() {
    // DEFER_TASKRUN: completion work runs only inside our io_uring_enter, never as an interrupt
    // of the loop. It needs SINGLE_ISSUER (only this thread submits, no SQ locking) and 6.1+.
    // COOP_TASKRUN is the pre-6.1 next best: no IPI to tell us about completions.
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
        // A registered ring fd spares io_uring_enter the fd table look-up; optional (5.18+).
        io_uring_register_ring_fd(&ring_);
        return true;
      }
      if (ret != -EINVAL) {
        std::fprintf(stderr, "uring_bare_echo: io_uring_queue_init: %s\n", std::strerror(-ret));
        return false;
      }
    }
    return false;
  }

  bool setup_buffer_ring() {
    const size_t ring_bytes = buffer_count_ * sizeof(io_uring_buf);
    void* ring_memory =
        mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    // MAP_POPULATE: the kernel cycles through every buffer of the ring, so fault them all in
    // now rather than during the first seconds of a measurement.
    void* buffer_memory =
        mmap(nullptr, size_t{buffer_count_} * buffer_size_, PROT_READ | PROT_WRITE,
             MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
    if (ring_memory == MAP_FAILED || buffer_memory == MAP_FAILED) {
      std::perror("uring_bare_echo: mmap");
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
      std::fprintf(stderr, "uring_bare_echo: io_uring_register_buf_ring: %s\n",
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
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        listen(listen_fd_, SOMAXCONN) != 0) {
      std::fprintf(stderr, "uring_bare_echo: cannot listen on port %u: %s\n", port,
                   std::strerror(errno));
      return false;
    }
    return true;
  }

  char* buffer(uint16_t id) const noexcept { return buffers_ + size_t{id} * buffer_size_; }

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
    Connection& conn = connections_[static_cast<size_t>(fd)];
    if (!conn.open || conn.closing) return;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, user_data(Op::kRecv, fd));
    conn.recv_armed = true;
  }

  void send_front(int fd, Connection& conn) {
    const PendingSend& front = conn.queue[conn.head];
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_send(sqe, fd, buffer(front.buffer_id) + front.offset, front.length - front.offset,
                       MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, user_data(Op::kSend, fd));
    conn.send_in_flight = true;
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
        if (!more && g_stop == 0) arm_accept();  // re-arm only once the multishot has ended
        break;
      case Op::kRecv:
        on_recv(fd, cqe.res, cqe.flags, more);
        break;
      case Op::kSend:
        on_sent(fd, cqe.res);
        break;
    }
  }

  void on_accepted(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const auto index = static_cast<size_t>(fd);
    if (index >= connections_.size()) connections_.resize(std::max(index + 1, 2 * index));
    Connection& conn = connections_[index];
    conn.open = true;
    conn.closing = false;
    conn.needs_rearm = false;
    arm_recv(fd);
  }

  void on_recv(int fd, int res, uint32_t flags, bool more) {
    Connection& conn = connections_[static_cast<size_t>(fd)];
    if (!more) conn.recv_armed = false;
    if (res > 0 && http_) {
      const auto id = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      count_requests(conn, buffer(id), static_cast<size_t>(res));
      recycle(id);
      if (!conn.closing && !conn.send_in_flight && conn.answers_owed > 0) send_answers(fd, conn);
      if (!more) arm_recv(fd);
    } else if (res > 0) {
      const auto id = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      if (conn.closing) {
        recycle(id);
      } else {
        conn.queue.push_back({id, 0, static_cast<uint32_t>(res)});
        if (!conn.send_in_flight) send_front(fd, conn);
      }
      if (!more) arm_recv(fd);  // the kernel ended the multishot (e.g. CQ overflow): go on
    } else if (res == -ENOBUFS) {
      conn.needs_rearm = true;  // the ring ran dry: re-arm once buffers came back
      rearm_.push_back(fd);
    } else {
      begin_close(fd, conn);  // 0: EOF; < 0: error
    }
    maybe_finish_close(fd, conn);
  }

  // Counts the heads that end in these bytes (a terminator may span two receives).
  static void count_requests(Connection& conn, const char* bytes, size_t length) {
    static constexpr char kEnd[] = "\r\n\r\n";
    for (size_t i = 0; i < length; ++i) {
      if (bytes[i] == kEnd[conn.matched]) {
        if (++conn.matched == 4) {
          ++conn.answers_owed;
          conn.matched = 0;
        }
      } else {
        conn.matched = bytes[i] == '\r' ? 1 : 0;
      }
    }
  }

  void send_answers(int fd, Connection& conn) {
    if (conn.answer_sent == conn.answer_bytes) {  // the previous batch is all out: a new one
      const uint32_t count = std::min(conn.answers_owed, kAnswersPerSend);
      conn.answers_owed -= count;
      conn.answer_bytes = count * static_cast<uint32_t>(kAnswer.size());
      conn.answer_sent = 0;
    }
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_send(sqe, fd, answers_.data() + conn.answer_sent,
                       conn.answer_bytes - conn.answer_sent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, user_data(Op::kSend, fd));
    conn.send_in_flight = true;
  }

  void on_sent(int fd, int res) {
    Connection& conn = connections_[static_cast<size_t>(fd)];
    conn.send_in_flight = false;
    if (res < 0) {
      begin_close(fd, conn);
    } else if (http_) {
      conn.answer_sent += static_cast<uint32_t>(res);
      if (!conn.closing && (conn.answer_sent < conn.answer_bytes || conn.answers_owed > 0)) {
        send_answers(fd, conn);
      }
    } else if (!conn.closing) {
      PendingSend& front = conn.queue[conn.head];
      front.offset += static_cast<uint32_t>(res);
      if (front.offset == front.length) {
        recycle(front.buffer_id);
        if (++conn.head == conn.queue.size()) {
          conn.queue.clear();  // keeps its capacity: no allocation per request
          conn.head = 0;
        }
      }
      if (conn.head < conn.queue.size()) send_front(fd, conn);  // the rest of a short send, too
    }
    maybe_finish_close(fd, conn);
  }

  void begin_close(int fd, Connection& conn) {
    if (conn.closing) return;
    conn.closing = true;
    for (size_t i = conn.head + (conn.send_in_flight ? 1 : 0); i < conn.queue.size(); ++i) {
      recycle(conn.queue[i].buffer_id);
    }
    conn.queue.resize(conn.head + (conn.send_in_flight ? 1 : 0));
    // The multishot recv holds a file reference: shutdown makes it post its final CQE.
    if (conn.recv_armed) shutdown(fd, SHUT_RDWR);
  }

  void maybe_finish_close(int fd, Connection& conn) {
    if (!conn.closing || conn.recv_armed || conn.send_in_flight) return;
    if (conn.head < conn.queue.size()) recycle(conn.queue[conn.head].buffer_id);  // failed send
    conn.queue.clear();
    conn.head = 0;
    conn.open = false;
    conn.closing = false;
    conn.needs_rearm = false;
    conn.matched = 0;
    conn.answers_owed = conn.answer_bytes = conn.answer_sent = 0;
    ::close(fd);
  }

  const unsigned buffer_count_;
  const unsigned buffer_size_;
  const bool http_;
  std::string answers_;  // kAnswersPerSend answers back to back
  io_uring ring_{};
  bool ring_ready_ = false;
  const char* mode_ = "";
  std::chrono::microseconds spin_{0};
  io_uring_buf_ring* buffer_ring_ = nullptr;
  char* buffers_ = nullptr;
  unsigned recycled_ = 0;  // buffers added to the ring since its tail last advanced
  int listen_fd_ = -1;
  std::vector<Connection> connections_;  // indexed by fd
  std::vector<int> rearm_;               // connections whose recv ended with ENOBUFS
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: uring_bare_echo -p PORT [-b BUFFER_SIZE (16384)] [-n BUFFER_COUNT "
               "(8192, a power of two <= 32768)] [-m echo|http] [-s SPIN_US (0)]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0;
  long buffer_size = 16384;
  long buffer_count = 8192;
  bool http = false;
  long spin_us = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "-m") {
      const std::string_view mode = argv[i + 1];
      if (mode != "echo" && mode != "http") usage();
      http = mode == "http";
    } else if (flag == "-p") {
      port = value;
    } else if (flag == "-b") {
      buffer_size = value;
    } else if (flag == "-n") {
      buffer_count = value;
    } else if (flag == "-s") {
      spin_us = value;
    } else {
      usage();
    }
  }
  const bool power_of_two = buffer_count > 0 && (buffer_count & (buffer_count - 1)) == 0;
  if (argc % 2 == 0 || port <= 0 || port > 65535 || buffer_size < 64 || buffer_size > (1 << 20) ||
      !power_of_two || buffer_count > 32768 || spin_us < 0 || spin_us > 1000000) {
    usage();
  }

  rlimit limit{};  // as many connections as the hard limit allows
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction action {};
  action.sa_handler = on_signal;  // no SA_RESTART: the wait in io_uring_enter returns -EINTR
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  EchoLoop loop(static_cast<unsigned>(buffer_count), static_cast<unsigned>(buffer_size), http);
  loop.set_spin(std::chrono::microseconds(spin_us));
  if (!loop.init(static_cast<uint16_t>(port))) return 1;
  std::fprintf(stderr, "uring_bare_echo: port %ld, %s, %ld buffers of %ld B%s, spin %ld us\n", port,
               loop.mode(), buffer_count, buffer_size, http ? ", canned HTTP answers" : "",
               spin_us);
  return loop.run();
}
