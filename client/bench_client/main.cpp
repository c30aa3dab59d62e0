// bench_client: echo pingpong load generator (docs/design.md, "Binaries").
//
//   bench_client -h HOST -p PORT -c CONNS -s SIZE -d SECONDS [-P DEPTH] [-t THREADS] [--json]
//                [-w WARMUP_SECONDS] [--server-pid PID] [--churn]
//   bench_client --version
//
// --churn measures connection set-up instead (Churn.h): each of CONNS slots connects, echoes
// one SIZE-byte message, closes and starts over; the report is in connections per second.
//
// Each thread runs one level-triggered epoll loop over its share of the connections. A run has
// three phases:
//   ramp     connect every connection (at most kMaxConnectsInFlight per thread at once, refused or
//            EAGAIN connects retried for kConnectRetryMs), then echo one warm-up message on each,
//            so that the server has accepted and served every connection before the clock starts;
//   warm-up  optional (-w): full load, nothing counted (page faults, TCP windows settle);
//   measure  each connection keeps DEPTH messages of SIZE bytes in flight for SECONDS; every
//            echoed byte is compared with what was sent, every completed message is one request
//            and one latency sample (first byte written -> last byte echoed);
//   stop     no new messages; the connections are closed.
// Message `seq` of connection c is a slice of a shared random table at an offset hashed from
// (c, seq), so neither side needs a per-connection buffer and every byte is checked by memcmp.
//
// With --server-pid, the server's utime and stime (from /proc/PID/stat) are sampled at the start
// and the end of the measure phase, so requests per server-CPU-second cover exactly the requests
// counted. Exit status: 0 clean, 1 any verification error, connect failure or lost connection,
// 2 bad usage.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ucp/base/UniqueFd.h"
#include "ucp/version.h"

#include "BenchSupport.h"
#include "Churn.h"

namespace {

using bench::CpuTimes;
using bench::Histogram;
using bench::now_ns;
using bench::PatternTable;
using bench::process_cpu;
using bench::self_cpu;
using bench::splitmix64;
using ucp::UniqueFd;

constexpr size_t kIoChunk = 64 * 1024;      // one recv at most
constexpr size_t kMaxIovecs = 16;           // messages per sendmsg
constexpr int kMaxEvents = 1024;            // epoll_wait batch
constexpr int kMaxConnectsInFlight = 256;   // per thread: keeps the server's SYN queue sane
constexpr int64_t kConnectRetryMs = 5000;   // how long a refused connect is retried
constexpr int64_t kRetryBackoffMs = 10;     // pause before retrying a refused connect
constexpr int kMaxReportedMismatches = 10;  // verification errors printed in full

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int conns = 1;
  size_t size = 64;
  double seconds = 5;
  int depth = 1;
  int threads = 1;
  bool json = false;
  bool uring = false;  // measure on io_uring instead of epoll
  bool churn = false;  // connection churn instead of pingpong (Churn.h)
  int server_pid = 0;
  int warmup_s = 0;
};

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "bench_client: %s\n", why);
  std::fprintf(stderr,
               "usage: bench_client -h HOST -p PORT -c CONNS -s SIZE -d SECONDS [-P DEPTH] "
               "[-t THREADS] [-w WARMUP_SECONDS] [--uring] [--churn] [--json] [--server-pid PID]\n"
               "       bench_client --version\n"
               "  echo pingpong: each connection keeps DEPTH (default 1) messages of SIZE bytes "
               "in flight;\n"
               "  --churn: each of CONNS slots connects, echoes one SIZE-byte message, closes "
               "(RST) and\n"
               "  starts over; reports connections/s and connect+echo latency.\n"
               "  Every echoed byte is verified; exit 1 on any error, 2 on bad usage.\n");
  std::exit(2);
}

long parse_number(std::string_view flag, const char* text, long low, long high) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high) {
    const std::string why = std::string(flag) + ": expected an integer in [" + std::to_string(low) +
                            ", " + std::to_string(high) + "], got '" + text + "'";
    usage(why.c_str());
  }
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  bool have_port = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help") usage(nullptr);
    if (flag == "--version") {
      std::printf("bench_client (UCP) %s\n", UCP_VERSION_STRING);
      std::exit(0);
    }
    if (flag == "--json") {
      options.json = true;
      continue;
    }
    if (flag == "--uring") {
      options.uring = true;
      continue;
    }
    if (flag == "--churn") {
      options.churn = true;
      continue;
    }
    if (i + 1 >= argc) usage((std::string(flag) + " needs a value").c_str());
    const char* value = argv[++i];
    if (flag == "-h") {
      options.host = value;
    } else if (flag == "-p") {
      options.port = static_cast<uint16_t>(parse_number(flag, value, 1, 65535));
      have_port = true;
    } else if (flag == "-c") {
      options.conns = static_cast<int>(parse_number(flag, value, 1, 1'000'000));
    } else if (flag == "-s") {
      options.size = static_cast<size_t>(parse_number(flag, value, 1, 16 * 1024 * 1024));
    } else if (flag == "-d") {
      options.seconds = static_cast<double>(parse_number(flag, value, 1, 86'400));
    } else if (flag == "-P") {
      options.depth = static_cast<int>(parse_number(flag, value, 1, 1024));
    } else if (flag == "-t") {
      options.threads = static_cast<int>(parse_number(flag, value, 1, 256));
    } else if (flag == "-w") {
      options.warmup_s = static_cast<int>(parse_number(flag, value, 0, 3600));
    } else if (flag == "--server-pid") {
      options.server_pid = static_cast<int>(parse_number(flag, value, 1, 1 << 30));
    } else {
      usage((std::string("unknown option ") + std::string(flag)).c_str());
    }
  }
  if (!have_port) usage("-p PORT is required");
  if (options.churn && (options.uring || options.depth != 1)) {
    usage("--churn runs one message per connection on epoll: no -P, no --uring");
  }
  options.threads = std::min(options.threads, options.conns);
  return options;
}

// ---------------------------------------------------------------------------------------------
// io_uring driver of one load thread (--uring): a ring, a provided buffer ring for the
// multishot recvs, and the two operations. user_data: operation << 32 | connection index.

class UringLoop {
 public:
  static constexpr uint64_t kRecv = 1;
  static constexpr uint64_t kSend = 2;

  UringLoop() = default;
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;
  ~UringLoop() {
    if (ring_ready_) io_uring_queue_exit(&ring_);  // cancels in-flight requests, frees the ring
    if (buffer_ring_ != nullptr) munmap(buffer_ring_, count_ * sizeof(io_uring_buf));
    if (buffers_ != nullptr) munmap(buffers_, size_t{count_} * buffer_size_);
  }

  /// `connections` sized rings; buffers big enough for one round of messages (`burst` bytes).
  bool init(size_t connections, size_t burst) {
    // Every connection's recv may complete in one batch before buffers are returned.
    count_ = std::bit_ceil(static_cast<unsigned>(std::clamp<size_t>(connections + 64, 64, 32768)));
    buffer_size_ = std::bit_ceil(static_cast<unsigned>(std::clamp<size_t>(burst, 1024, 16384)));
    const unsigned cq = std::bit_ceil(static_cast<unsigned>(
        std::min<size_t>(std::max<size_t>(2 * connections + count_, 4096), 65536)));
    const unsigned flag_sets[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                                  IORING_SETUP_COOP_TASKRUN, 0};
    for (const unsigned flags : flag_sets) {
      io_uring_params params{};
      params.flags = flags | IORING_SETUP_CQSIZE;
      params.cq_entries = cq;
      const int ret = io_uring_queue_init_params(4096, &ring_, &params);
      if (ret == 0) {
        ring_ready_ = true;
        break;
      }
      if (ret != -EINVAL) break;
    }
    if (!ring_ready_) {
      std::fprintf(stderr, "bench_client: io_uring_queue_init failed\n");
      return false;
    }
    io_uring_register_ring_fd(&ring_);
    void* ring_memory = mmap(nullptr, count_ * sizeof(io_uring_buf), PROT_READ | PROT_WRITE,
                             MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    void* buffer_memory = mmap(nullptr, size_t{count_} * buffer_size_, PROT_READ | PROT_WRITE,
                               MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
    if (ring_memory == MAP_FAILED || buffer_memory == MAP_FAILED) {
      std::perror("bench_client: mmap");
      return false;
    }
    buffer_ring_ = static_cast<io_uring_buf_ring*>(ring_memory);
    buffers_ = static_cast<char*>(buffer_memory);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<uint64_t>(ring_memory);
    registration.ring_entries = count_;
    registration.bgid = 0;
    if (const int ret = io_uring_register_buf_ring(&ring_, &registration, 0); ret != 0) {
      std::fprintf(stderr, "bench_client: io_uring_register_buf_ring: %s\n", std::strerror(-ret));
      return false;
    }
    io_uring_buf_ring_init(buffer_ring_);
    for (unsigned id = 0; id < count_; ++id) recycle(static_cast<uint16_t>(id));
    advance();
    return true;
  }

  const char* buffer(uint16_t id) const noexcept { return buffers_ + size_t{id} * buffer_size_; }

  void recycle(uint16_t id) noexcept {
    io_uring_buf_ring_add(buffer_ring_, buffers_ + size_t{id} * buffer_size_, buffer_size_, id,
                          io_uring_buf_ring_mask(count_), static_cast<int>(recycled_++));
  }

  void arm_recv(int fd, size_t index) {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, kRecv << 32 | index);
  }

  void send(int fd, size_t index, const char* data, size_t length) {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_send(sqe, fd, data, length, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, kSend << 32 | index);
  }

  /// One io_uring_enter: submits everything prepared, waits up to `wait_ns` for a completion.
  bool submit_and_wait(int64_t wait_ns) {
    __kernel_timespec timeout{};
    timeout.tv_sec = wait_ns / 1'000'000'000;
    timeout.tv_nsec = wait_ns % 1'000'000'000;
    io_uring_cqe* cqe = nullptr;
    const int ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &timeout, nullptr);
    if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
      std::fprintf(stderr, "bench_client: io_uring_submit_and_wait: %s\n", std::strerror(-ret));
      return false;
    }
    return true;
  }

  /// Calls f(user_data, res, flags) for every ready CQE, then hands the CQ slots and the
  /// recycled buffers back at once.
  template <class F>
  void for_each_cqe(F&& f) {
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      f(cqe->user_data, cqe->res, cqe->flags);
    }
    io_uring_cq_advance(&ring_, seen);
    advance();
  }

 private:
  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // SQ full: submit this much now
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }
  void advance() noexcept {
    if (recycled_ == 0) return;
    io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(recycled_));
    recycled_ = 0;
  }

  io_uring ring_{};
  bool ring_ready_ = false;
  io_uring_buf_ring* buffer_ring_ = nullptr;
  char* buffers_ = nullptr;
  unsigned count_ = 0;
  unsigned buffer_size_ = 0;
  unsigned recycled_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Shared state between the main thread and the load threads

enum class Phase : int { kRamp, kMeasure, kStop };

struct Shared {
  const Options* options = nullptr;
  sockaddr_in address{};
  std::atomic<Phase> phase{Phase::kRamp};
  std::atomic<int> ramped_threads{0};
  std::atomic<bool> ramp_failed{false};
  std::atomic<int> reported_mismatches{0};
  int64_t record_start_ns = 0;  // end of the warm-up; both written before phase is kMeasure
  int64_t measure_end_ns = 0;
};

/// Counters one load thread writes and the main thread reads once per second.
struct alignas(64) Counters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> verify_errors{0};
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> closed_errors{0};  // server closed or reset a connection mid-run
  std::atomic<int> connected{0};
};

// ---------------------------------------------------------------------------------------------
// One load thread: an epoll loop over connections id = first, first + step, ...

class LoadThread {
 public:
  LoadThread(Shared& shared, Counters& counters, const PatternTable& pattern, int first_id,
             int step)
      : shared_(shared), options_(*shared.options), counters_(counters), pattern_(pattern) {
    for (int id = first_id; id < options_.conns; id += step) {
      Connection conn;
      conn.id = static_cast<uint32_t>(id);
      conn.key = splitmix64(static_cast<uint64_t>(id));
      connections_.push_back(std::move(conn));
    }
    send_times_.assign(connections_.size() * static_cast<size_t>(options_.depth), 0);
    scratch_.resize(kIoChunk);
  }

  Histogram& histogram() noexcept { return histogram_; }

  void run() {
    epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) {
      std::perror("bench_client: epoll_create1");
      fail_ramp();
      return;
    }
    if (!ramp()) {
      fail_ramp();
      return;
    }
    shared_.ramped_threads.fetch_add(1);
    while (shared_.phase.load() == Phase::kRamp) std::this_thread::sleep_for(kWaitSlice);
    if (shared_.phase.load() == Phase::kMeasure) {
      if (options_.uring) {
        measure_uring();
      } else {
        measure();
      }
    }
    for (auto& conn : connections_) conn.fd.reset();
  }

 private:
  static constexpr std::chrono::milliseconds kWaitSlice{1};
  enum class State : uint8_t { kIdle, kConnecting, kWaitingRetry, kOpen, kDone, kFailed };

  struct Connection {
    UniqueFd fd;
    uint32_t id = 0;
    State state = State::kIdle;
    bool want_write = false;   // EPOLLOUT requested because a send would block
    uint64_t key = 0;          // pattern key of this connection's stream
    uint64_t sent = 0;         // stream bytes written
    uint64_t received = 0;     // stream bytes echoed back and verified
    uint64_t send_limit = 0;   // stream bytes that may be written now (messages issued * size)
    uint64_t issued = 0;       // messages issued
    int64_t first_try_ms = 0;  // when connecting began (refusals are retried until + retry window)
    int64_t retry_at_ns = 0;
    bool send_in_flight = false;  // io_uring mode: one send per connection keeps bytes in order
    uint64_t send_pending = 0;    // io_uring mode: bytes of the send in flight
    bool needs_recv = false;      // io_uring mode: multishot recv to (re-)arm
  };

  void fail_ramp() {
    shared_.ramp_failed.store(true);
    shared_.ramped_threads.fetch_add(1);
  }

  // Ramp: connect everything, then one warm-up echo per connection. True when all are ready.
  bool ramp() {
    const int64_t deadline = now_ns() + ramp_budget_ns();
    size_t next = 0;  // next connection never tried
    int in_flight = 0;
    size_t ready = 0;
    std::deque<size_t> retries;
    std::array<epoll_event, kMaxEvents> events{};
    while (ready < connections_.size()) {
      const int64_t now = now_ns();
      if (now > deadline) {
        std::fprintf(stderr, "bench_client: ramp timed out: %zu of %zu connections ready\n", ready,
                     connections_.size());
        counters_.connect_errors.fetch_add(connections_.size() - ready);
        return false;
      }
      while (!retries.empty() && in_flight < kMaxConnectsInFlight &&
             connections_[retries.front()].retry_at_ns <= now) {
        const size_t index = retries.front();
        retries.pop_front();
        in_flight += start_connect(index, retries) ? 1 : 0;
      }
      while (next < connections_.size() && in_flight < kMaxConnectsInFlight) {
        connections_[next].first_try_ms = now / 1'000'000;
        in_flight += start_connect(next++, retries) ? 1 : 0;
      }
      if (failed_) return false;
      const int n = epoll_wait(epoll_.get(), events.data(), kMaxEvents, 10);
      if (n < 0 && errno != EINTR) {
        std::perror("bench_client: epoll_wait");
        return false;
      }
      for (int i = 0; i < n; ++i) {
        const size_t index = events[static_cast<size_t>(i)].data.u64;
        Connection& conn = connections_[index];
        if (conn.state == State::kConnecting) {
          --in_flight;
          finish_connect(index, retries);
        } else if (conn.state == State::kOpen) {
          on_ready(conn, index, events[static_cast<size_t>(i)].events);
          if (conn.state == State::kOpen && conn.received == options_.size) {
            conn.state = State::kDone;  // warm-up echoed: ready for the measurement
            ++ready;
          }
        }
        if (failed_) return false;
      }
    }
    return true;
  }

  int64_t ramp_budget_ns() const noexcept {
    // 30 s, plus 1 s per 1,000 connections: a slow accept loop is not a failure.
    return (30 + options_.conns / 1000) * int64_t{1'000'000'000};
  }

  // Starts a non-blocking connect; true when it is in flight (its result comes as EPOLLOUT).
  bool start_connect(size_t index, std::deque<size_t>& retries) {
    Connection& conn = connections_[index];
    conn.fd = UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!conn.fd) {
      std::fprintf(stderr, "bench_client: socket: %s (raise ulimit -n?)\n", std::strerror(errno));
      return fail_connection(conn);
    }
    const int one = 1;
    setsockopt(conn.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT;
    event.data.u64 = index;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn.fd.get(), &event) != 0) {
      std::perror("bench_client: epoll_ctl");
      return fail_connection(conn);
    }
    const auto* address = reinterpret_cast<const sockaddr*>(&shared_.address);
    if (connect(conn.fd.get(), address, sizeof shared_.address) == 0 || errno == EINPROGRESS) {
      conn.state = State::kConnecting;
      return true;
    }
    retry_or_fail(index, errno, retries);
    return false;
  }

  void finish_connect(size_t index, std::deque<size_t>& retries) {
    Connection& conn = connections_[index];
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(conn.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error != 0) {
      retry_or_fail(index, error, retries);
      return;
    }
    conn.state = State::kOpen;
    counters_.connected.fetch_add(1, std::memory_order_relaxed);
    set_write_interest(conn, index, false);
    issue(conn, index, now_ns());  // the warm-up message
    flush(conn, index);
  }

  void retry_or_fail(size_t index, int error, std::deque<size_t>& retries) {
    Connection& conn = connections_[index];
    conn.fd.reset();  // also removes it from the epoll set
    const bool transient = error == ECONNREFUSED || error == EAGAIN || error == EADDRNOTAVAIL ||
                           error == ETIMEDOUT || error == ECONNRESET || error == EINTR;
    if (transient && now_ns() / 1'000'000 - conn.first_try_ms < kConnectRetryMs) {
      conn.state = State::kWaitingRetry;
      conn.retry_at_ns = now_ns() + kRetryBackoffMs * 1'000'000;
      retries.push_back(index);
      return;
    }
    std::fprintf(stderr, "bench_client: connect to %s:%u failed: %s\n", options_.host.c_str(),
                 options_.port, std::strerror(error));
    fail_connection(conn);
  }

  bool fail_connection(Connection& conn) {
    conn.fd.reset();
    conn.state = State::kFailed;
    counters_.connect_errors.fetch_add(1);
    failed_ = true;
    return false;
  }

  void measure() {
    int64_t now = now_ns();
    for (size_t i = 0; i < connections_.size(); ++i) {
      Connection& conn = connections_[i];
      conn.state = State::kOpen;
      for (int d = 0; d < options_.depth; ++d) issue(conn, i, now);
      flush(conn, i);
    }
    measuring_ = true;
    std::array<epoll_event, kMaxEvents> events{};
    while (true) {
      now = now_ns();
      if (now >= shared_.measure_end_ns ||
          shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
        break;
      }
      const auto timeout_ms =
          static_cast<int>(std::min<int64_t>((shared_.measure_end_ns - now) / 1'000'000 + 1, 100));
      const int n = epoll_wait(epoll_.get(), events.data(), kMaxEvents, timeout_ms);
      if (n < 0 && errno != EINTR) {
        std::perror("bench_client: epoll_wait");
        break;
      }
      for (int i = 0; i < n; ++i) {
        const size_t index = events[static_cast<size_t>(i)].data.u64;
        on_ready(connections_[index], index, events[static_cast<size_t>(i)].events);
      }
    }
    measuring_ = false;
  }

  // The measurement on io_uring: one multishot recv per connection into this thread's provided
  // buffer ring, one send in flight per connection straight from the pattern table, one
  // submit-and-wait per iteration. Connections were ramped on epoll; that set is closed first,
  // so that no epoll wake-up is charged to the server's sends.
  void measure_uring() {
    epoll_.reset();
    UringLoop uring;
    if (!uring.init(connections_.size(), options_.size * static_cast<size_t>(options_.depth))) {
      for (auto& conn : connections_) lose(conn, "io_uring set-up failed");
      return;
    }
    int64_t now = now_ns();
    for (size_t i = 0; i < connections_.size(); ++i) {
      Connection& conn = connections_[i];
      conn.state = State::kOpen;
      conn.needs_recv = true;
      for (int d = 0; d < options_.depth; ++d) issue(conn, i, now);
    }
    measuring_ = true;
    std::vector<size_t> rearm(connections_.size());
    for (size_t i = 0; i < rearm.size(); ++i) rearm[i] = i;
    for (size_t i = 0; i < connections_.size(); ++i) send_uring(uring, connections_[i], i);
    while (true) {
      for (const size_t index : rearm) {
        Connection& conn = connections_[index];
        if (conn.state == State::kOpen && conn.needs_recv) uring.arm_recv(conn.fd.get(), index);
        conn.needs_recv = false;
      }
      rearm.clear();
      now = now_ns();
      if (now >= shared_.measure_end_ns ||
          shared_.phase.load(std::memory_order_relaxed) == Phase::kStop) {
        break;
      }
      const int64_t wait_ns = std::min<int64_t>(shared_.measure_end_ns - now, 100'000'000);
      if (!uring.submit_and_wait(wait_ns)) break;
      uring.for_each_cqe([&](uint64_t data, int res, uint32_t flags) {
        const auto index = static_cast<size_t>(data & 0xffffffffu);
        Connection& conn = connections_[index];
        if ((data >> 32) == UringLoop::kSend) {
          conn.send_in_flight = false;
          if (conn.state != State::kOpen) return;
          if (res < 0) {
            lose(conn, std::strerror(-res));
            return;
          }
          conn.sent -= conn.send_pending - static_cast<uint64_t>(res);  // a short send: resend
          conn.send_pending = 0;
          send_uring(uring, conn, index);
          return;
        }
        const bool more = (flags & IORING_CQE_F_MORE) != 0;
        if (res > 0) {
          const auto id = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
          if (conn.state == State::kOpen &&
              verify(conn, std::span<const char>(uring.buffer(id), static_cast<size_t>(res)))) {
            complete_messages(conn, index, static_cast<size_t>(res));
            send_uring(uring, conn, index);
          }
          uring.recycle(id);
          if (!more && conn.state == State::kOpen) {
            conn.needs_recv = true;
            rearm.push_back(index);
          }
        } else if (res == -ENOBUFS) {
          conn.needs_recv = true;  // the ring ran dry: re-arm after this batch returned buffers
          rearm.push_back(index);
        } else if (conn.state == State::kOpen) {
          lose(conn, res == 0 ? "closed by the server" : std::strerror(-res));
        }
      });
    }
    measuring_ = false;
  }  // ~UringLoop cancels what is in flight before the connections close

  // io_uring mode: sends the next contiguous piece of [sent, send_limit) unless one is in flight.
  // `sent` counts it at once (echoed bytes may come back before its CQE); a short send rolls back.
  void send_uring(UringLoop& uring, Connection& conn, size_t index) {
    if (conn.send_in_flight || conn.state != State::kOpen || conn.sent >= conn.send_limit) return;
    const uint64_t size = options_.size;
    const uint64_t offset = conn.sent % size;
    const uint64_t length = std::min(size - offset, conn.send_limit - conn.sent);
    uring.send(conn.fd.get(), index, pattern_.message(conn.key, conn.sent / size) + offset,
               static_cast<size_t>(length));
    conn.send_in_flight = true;
    conn.send_pending = length;
    conn.sent += length;
  }

  // Issues message `conn.issued`: stamps its start and lets flush() write it.
  void issue(Connection& conn, size_t index, int64_t now) {
    send_times_[slot(index, conn.issued)] = now;
    ++conn.issued;
    conn.send_limit += options_.size;
  }

  size_t slot(size_t index, uint64_t seq) const noexcept {
    return index * static_cast<size_t>(options_.depth) +
           static_cast<size_t>(seq % static_cast<uint64_t>(options_.depth));
  }

  void on_ready(Connection& conn, size_t index, uint32_t events) {
    if (conn.state != State::kOpen) return;  // failed earlier in this batch
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) on_readable(conn, index);
    if (conn.state == State::kOpen && (events & EPOLLOUT) != 0) flush(conn, index);
  }

  void on_readable(Connection& conn, size_t index) {
    for (;;) {
      const ssize_t n = recv(conn.fd.get(), scratch_.data(), scratch_.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        lose(conn, std::strerror(errno));
        return;
      }
      if (n == 0) {
        lose(conn, "closed by the server");
        return;
      }
      const auto bytes = static_cast<size_t>(n);
      if (!verify(conn, std::span<const char>(scratch_.data(), bytes))) return;
      complete_messages(conn, index, bytes);
      if (conn.state != State::kOpen) return;
      if (bytes < scratch_.size()) break;  // drained (level-triggered: no EAGAIN round trip)
    }
    flush(conn, index);
  }

  // Compares echoed bytes [received, received + got.size()) with what was sent, per message.
  bool verify(Connection& conn, std::span<const char> got) {
    if (conn.received + got.size() > conn.sent) {
      report_mismatch(conn, conn.sent, "more bytes echoed than sent");
      return false;
    }
    const uint64_t size = options_.size;
    uint64_t pos = conn.received;
    size_t done = 0;
    while (done < got.size()) {
      const uint64_t offset = pos % size;
      const size_t length =
          static_cast<size_t>(std::min<uint64_t>(size - offset, got.size() - done));
      const char* expected = pattern_.message(conn.key, pos / size) + offset;
      if (std::memcmp(expected, got.data() + done, length) != 0) {
        size_t at = 0;
        while (expected[at] == got[done + at]) ++at;
        char what[64];
        std::snprintf(what, sizeof what, "expected 0x%02x, got 0x%02x",
                      static_cast<unsigned char>(expected[at]),
                      static_cast<unsigned char>(got[done + at]));
        report_mismatch(conn, pos + at, what);
        return false;
      }
      pos += length;
      done += length;
    }
    return true;
  }

  void report_mismatch(Connection& conn, uint64_t pos, const char* what) {
    counters_.verify_errors.fetch_add(1);
    if (shared_.reported_mismatches.fetch_add(1) < kMaxReportedMismatches) {
      std::fprintf(stderr,
                   "bench_client: verification error: connection %u message %" PRIu64
                   " byte %" PRIu64 ": %s\n",
                   conn.id, pos / options_.size, pos % options_.size, what);
    }
    conn.fd.reset();
    conn.state = State::kFailed;
    counters_.connected.fetch_sub(1, std::memory_order_relaxed);
    failed_ = true;  // ends a ramp at once; the measurement carries on with the others
  }

  void lose(Connection& conn, const char* why) {
    counters_.closed_errors.fetch_add(1);
    std::fprintf(stderr, "bench_client: connection %u lost: %s\n", conn.id, why);
    conn.fd.reset();
    conn.state = State::kFailed;
    counters_.connected.fetch_sub(1, std::memory_order_relaxed);
    failed_ = true;  // ends a ramp at once; the measurement carries on with the others
  }

  // Accounts the messages that `bytes` more echoed bytes completed, and issues their successors.
  void complete_messages(Connection& conn, size_t index, size_t bytes) {
    const uint64_t size = options_.size;
    const uint64_t before = conn.received / size;
    conn.received += bytes;
    const uint64_t after = conn.received / size;
    if (after == before || !measuring_) return;
    const int64_t now = now_ns();
    const bool record = now >= shared_.record_start_ns;  // not during the warm-up
    for (uint64_t seq = before; seq < after; ++seq) {
      if (record) histogram_.record(now - send_times_[slot(index, seq)]);
      issue(conn, index, now);
    }
    if (!record) return;
    counters_.requests.fetch_add(after - before, std::memory_order_relaxed);
    counters_.bytes.fetch_add((after - before) * size, std::memory_order_relaxed);
  }

  // Writes stream bytes [sent, send_limit), several messages per sendmsg; waits for EPOLLOUT
  // when the socket is full.
  void flush(Connection& conn, size_t index) {
    const uint64_t size = options_.size;
    while (conn.sent < conn.send_limit) {
      std::array<iovec, kMaxIovecs> iov{};
      size_t count = 0;
      for (uint64_t pos = conn.sent; pos < conn.send_limit && count < kMaxIovecs; ++count) {
        const uint64_t offset = pos % size;
        const uint64_t length = std::min(size - offset, conn.send_limit - pos);
        iov[count].iov_base = const_cast<char*>(pattern_.message(conn.key, pos / size) + offset);
        iov[count].iov_len = static_cast<size_t>(length);
        pos += length;
      }
      msghdr message{};
      message.msg_iov = iov.data();
      message.msg_iovlen = count;
      const ssize_t n = sendmsg(conn.fd.get(), &message, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN) break;
        if (errno == EINTR) continue;
        lose(conn, std::strerror(errno));
        return;
      }
      conn.sent += static_cast<uint64_t>(n);
    }
    const bool blocked = conn.sent < conn.send_limit;
    if (blocked != conn.want_write) set_write_interest(conn, index, blocked);
  }

  void set_write_interest(Connection& conn, size_t index, bool on) {
    epoll_event event{};
    event.events = EPOLLIN | (on ? EPOLLOUT : 0u);
    event.data.u64 = index;
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn.fd.get(), &event);
    conn.want_write = on;
  }

  Shared& shared_;
  const Options& options_;
  Counters& counters_;
  UniqueFd epoll_;
  std::vector<Connection> connections_;
  std::vector<int64_t> send_times_;  // [connection][seq % depth]: when the message was issued
  const PatternTable& pattern_;
  std::vector<char> scratch_;  // recv buffer
  Histogram histogram_;
  bool measuring_ = false;
  bool failed_ = false;
};

// ---------------------------------------------------------------------------------------------

bool resolve(const std::string& host, uint16_t port, sockaddr_in& out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) return false;
  std::memcpy(&out, result->ai_addr, sizeof out);
  out.sin_port = htons(port);
  freeaddrinfo(result);
  return true;
}

bool raise_fd_limit(int conns) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t needed = static_cast<rlim_t>(conns) + 64;
  if (limit.rlim_cur < needed) {
    std::fprintf(stderr,
                 "bench_client: %d connections need %llu file descriptors; the hard limit is "
                 "%llu (raise it: ulimit -Hn)\n",
                 conns, static_cast<unsigned long long>(needed),
                 static_cast<unsigned long long>(limit.rlim_cur));
    return false;
  }
  return true;
}

std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  if (!raise_fd_limit(options.conns)) return 1;

  Shared shared;
  shared.options = &options;
  if (!resolve(options.host, options.port, shared.address)) {
    std::fprintf(stderr, "bench_client: cannot resolve %s\n", options.host.c_str());
    return 2;
  }
  if (options.churn) {
    bench::ChurnOptions churn;
    churn.address = shared.address;
    churn.target = options.host + ":" + std::to_string(options.port);
    churn.conns = options.conns;
    churn.size = options.size;
    churn.seconds = options.seconds;
    churn.warmup_s = options.warmup_s;
    churn.threads = options.threads;
    churn.json = options.json;
    churn.server_pid = options.server_pid;
    return bench::run_churn(churn, g_interrupted);
  }
  FILE* progress = options.json ? stderr : stdout;

  const PatternTable pattern(options.size);
  const auto thread_count = static_cast<size_t>(options.threads);
  std::vector<Counters> counters(thread_count);
  std::vector<std::unique_ptr<LoadThread>> loads;
  for (size_t t = 0; t < thread_count; ++t) {
    loads.push_back(std::make_unique<LoadThread>(shared, counters[t], pattern, static_cast<int>(t),
                                                 options.threads));
  }
  const int64_t ramp_start = now_ns();
  std::vector<std::thread> threads;
  for (auto& load : loads) threads.emplace_back([&load] { load->run(); });

  // Wait for every thread's ramp (each bounds its own), reporting progress once per second.
  int64_t next_report = ramp_start + 1'000'000'000;
  while (shared.ramped_threads.load() < options.threads && !g_interrupted.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (now_ns() >= next_report) {
      int connected = 0;
      for (auto& c : counters) connected += c.connected.load(std::memory_order_relaxed);
      std::fprintf(progress, "ramp: %d/%d connections\n", connected, options.conns);
      std::fflush(progress);
      next_report += 1'000'000'000;
    }
  }
  const double ramp_s = static_cast<double>(now_ns() - ramp_start) / 1e9;
  const bool ramp_ok = !shared.ramp_failed.load() && !g_interrupted.load();

  // Load starts now; counting, latency samples and CPU sampling after the warm-up.
  shared.record_start_ns = now_ns() + int64_t{options.warmup_s} * 1'000'000'000;
  shared.measure_end_ns = shared.record_start_ns + static_cast<int64_t>(options.seconds * 1e9);
  shared.phase.store(ramp_ok ? Phase::kMeasure : Phase::kStop);
  if (ramp_ok && options.warmup_s > 0) {
    std::fprintf(progress, "warm-up: %d s\n", options.warmup_s);
    std::fflush(progress);
    while (now_ns() < shared.record_start_ns && !g_interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  CpuTimes client_before = self_cpu();
  std::optional<CpuTimes> server_before;
  if (options.server_pid != 0) server_before = process_cpu(options.server_pid);
  const int64_t start = now_ns();

  uint64_t last_requests = 0;
  uint64_t last_bytes = 0;
  int64_t last_time = start;
  while (ramp_ok) {
    const int64_t now = now_ns();
    if (now >= shared.measure_end_ns || g_interrupted.load()) break;
    const int64_t next_tick = std::min(last_time + 1'000'000'000, shared.measure_end_ns);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(next_tick - now, 0)));
    uint64_t requests = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    int connected = 0;
    for (auto& c : counters) {
      requests += c.requests.load(std::memory_order_relaxed);
      bytes += c.bytes.load(std::memory_order_relaxed);
      errors += c.verify_errors.load(std::memory_order_relaxed) +
                c.closed_errors.load(std::memory_order_relaxed);
      connected += c.connected.load(std::memory_order_relaxed);
    }
    const int64_t tick_end = now_ns();
    const double dt = static_cast<double>(tick_end - last_time) / 1e9;
    std::fprintf(progress, "[%5.1fs] qps %10.0f  %8.2f MB/s  conns %d  errors %" PRIu64 "\n",
                 static_cast<double>(tick_end - start) / 1e9,
                 static_cast<double>(requests - last_requests) / dt,
                 static_cast<double>(bytes - last_bytes) / dt / 1e6, connected, errors);
    std::fflush(progress);
    last_requests = requests;
    last_bytes = bytes;
    last_time = tick_end;
  }
  shared.phase.store(Phase::kStop);
  for (auto& thread : threads) thread.join();  // each leaves its loop within 100 ms
  const double seconds = static_cast<double>(now_ns() - start) / 1e9;
  const CpuTimes client_after = self_cpu();
  std::optional<CpuTimes> server_after;
  if (options.server_pid != 0) server_after = process_cpu(options.server_pid);

  Histogram histogram;
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t verify_errors = 0;
  uint64_t connect_errors = 0;
  uint64_t closed_errors = 0;
  for (size_t t = 0; t < thread_count; ++t) {
    histogram.merge(loads[t]->histogram());
    requests += counters[t].requests.load();
    bytes += counters[t].bytes.load();
    verify_errors += counters[t].verify_errors.load();
    connect_errors += counters[t].connect_errors.load();
    closed_errors += counters[t].closed_errors.load();
  }
  const uint64_t errors = verify_errors + connect_errors + closed_errors;
  const double qps = ramp_ok ? static_cast<double>(requests) / seconds : 0;
  const double client_cpu = client_after.total() - client_before.total();
  const double client_user = client_after.user_s - client_before.user_s;
  double server_cpu = -1;
  double server_user = -1;
  if (server_before && server_after) {
    server_cpu = server_after->total() - server_before->total();
    server_user = server_after->user_s - server_before->user_s;
  }

  if (!ramp_ok && !options.json) {
    std::printf("ramp failed: %" PRIu64 " connect errors, %" PRIu64 " verification errors, %" PRIu64
                " lost connections; nothing measured\n",
                connect_errors, verify_errors, closed_errors);
  } else if (options.json) {
    std::printf(
        "{\"mode\":\"pingpong\",\"qps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
        "\"max_us\":%.1f,"
        "\"errors\":%" PRIu64 ",\"verify_errors\":%" PRIu64 ",\"connect_errors\":%" PRIu64
        ",\"closed_errors\":%" PRIu64 ",\"requests\":%" PRIu64
        ",\"seconds\":%.3f,\"conns\":%d,\"size\":%zu,\"depth\":%d,\"threads\":%d,"
        "\"ramp_s\":%.3f,\"client_cpu_s\":%.3f,\"client_utime_s\":%.3f,\"server_cpu_s\":%.3f,"
        "\"server_utime_s\":%.3f}\n",
        qps, histogram.percentile_us(0.50), histogram.percentile_us(0.99),
        histogram.percentile_us(0.999), histogram.max_us(), errors, verify_errors, connect_errors,
        closed_errors, requests, seconds, options.conns, options.size, options.depth,
        options.threads, ramp_s, client_cpu, client_user, server_cpu, server_user);
  } else {
    std::printf("connections %d (ramped in %.2f s), message %zu B, depth %d, threads %d\n",
                options.conns, ramp_s, options.size, options.depth, options.threads);
    std::printf("requests %" PRIu64 " in %.2f s: %.0f req/s, %.2f MB/s echoed\n", requests, seconds,
                qps, static_cast<double>(bytes) / seconds / 1e6);
    std::printf("errors %" PRIu64 " (verification %" PRIu64 ", connect %" PRIu64
                ", lost connections %" PRIu64 ")\n",
                errors, verify_errors, connect_errors, closed_errors);
    std::printf("latency us: p50 %.1f  p99 %.1f  p999 %.1f  max %.1f\n",
                histogram.percentile_us(0.50), histogram.percentile_us(0.99),
                histogram.percentile_us(0.999), histogram.max_us());
    bench::print_cpu_summary(seconds, client_cpu, client_user, server_cpu, server_user,
                             static_cast<double>(requests), "requests");
  }
  return errors == 0 && ramp_ok ? 0 : 1;
}
