// TODO(epoll backend): delete this file once UCP's loops run on epoll (LoopOptions::backend =
// BackendKind::kEpoll). Until then it keeps bench_client's default mode (BENCH_CLIENT_MODE=epoll
// in benchmark.sh) what it has always measured: a readiness-based client that sends with one
// syscall per message, rather than io_uring's batched submissions.
//
// The former hand-written clients on epoll, pingpong and churn, kept verbatim apart from their
// interfaces (Pingpong.h, Churn.h). main.cpp and Churn.cpp use them only when
// ucp_backend_available(kEpoll) says no, with one line on stderr.
//
// Pingpong: each thread runs one level-triggered epoll loop over its share of the connections:
// ramp (at most kMaxConnectsInFlight connects at once, refusals retried for kConnectRetryMs,
// then one warm-up echo per connection), measure (DEPTH messages in flight, several per
// sendmsg, every echoed byte verified), stop.
// Churn: an edge-triggered epoll loop per thread; each slot connects, sends its message,
// verifies the echo, closes with RST and starts again.

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ucp/base/UniqueFd.h"

#include "Churn.h"
#include "Pingpong.h"

namespace bench {
namespace {

using ucp::UniqueFd;

constexpr size_t kIoChunk = 64 * 1024;  // one recv at most
constexpr size_t kMaxIovecs = 16;       // messages per sendmsg
constexpr int kMaxEvents = 1024;        // epoll_wait batch

class LegacyEpollPingpong final : public PingpongThread {
 public:
  LegacyEpollPingpong(Shared& shared, Counters& counters, const PatternTable& pattern, int first_id,
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

  Histogram& histogram() override { return histogram_; }

  void run() override {
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
    if (shared_.phase.load() == Phase::kMeasure) measure();
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
    conn.fd =
        UniqueFd(socket(shared_.address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
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
    if (connect(conn.fd.get(), shared_.address.get(), shared_.address.length()) == 0 ||
        errno == EINPROGRESS) {
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

// One load thread: an edge-triggered epoll loop over slots first, first + step, ... Each slot
// cycles: socket + connect -> (EPOLLOUT) send the message -> (EPOLLIN) verify the echo ->
// close with RST -> start again at once. RST (SO_LINGER 0) leaves no TIME_WAIT socket on
// either side: at tens of thousands of connections a second an orderly close would use up
// the ephemeral ports within seconds.
class LegacyEpollChurn final : public ChurnThread {
 public:
  LegacyEpollChurn(const ChurnOptions& options, ChurnShared& shared, ChurnCounters& counters,
                   const PatternTable& pattern, int first, int step)
      : options_(options), shared_(shared), counters_(counters), pattern_(pattern) {
    for (int id = first; id < options.conns; id += step) {
      Slot slot;
      slot.key = splitmix64(static_cast<uint64_t>(id) | (uint64_t{1} << 40));
      slot.id = id;
      slots_.push_back(std::move(slot));
    }
    scratch_.resize(std::max<size_t>(options.size, 4096));
  }

  Histogram& histogram() override { return histogram_; }

  void run() override {
    epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) {
      std::perror("bench_client: epoll_create1");
      counters_.connect_errors.fetch_add(slots_.size());
      return;
    }
    int64_t now = now_ns();
    for (size_t i = 0; i < slots_.size(); ++i) start(i, now);
    std::vector<epoll_event> events(kMaxEvents);
    while (!shared_.stop.load(std::memory_order_relaxed)) {
      now = now_ns();
      if (now >= shared_.end_ns) break;
      retry_due(now);
      const int n = epoll_wait(epoll_.get(), events.data(), kMaxEvents, 10);
      if (n < 0 && errno != EINTR) {
        std::perror("bench_client: epoll_wait");
        break;
      }
      for (int e = 0; e < n; ++e) {
        on_event(static_cast<size_t>(events[static_cast<size_t>(e)].data.u64),
                 events[static_cast<size_t>(e)].events);
      }
    }
    for (auto& slot : slots_) slot.fd.reset();  // SO_LINGER 0: RST, nothing lingers
  }

 private:
  enum class State : uint8_t { kConnecting, kEchoing, kWaitingRetry };
  struct Slot {
    UniqueFd fd;
    int id = 0;
    uint64_t key = 0;    // pattern key: message `cycle` of this slot
    uint64_t cycle = 0;  // connections made by this slot so far
    State state = State::kWaitingRetry;
    int64_t started_ns = 0;  // before socket(): the latency covers connect and echo
    int64_t retry_at_ns = 0;
    size_t sent = 0;
    size_t received = 0;
  };

  const char* message(const Slot& slot) const noexcept {
    return pattern_.message(slot.key, slot.cycle);
  }

  void start(size_t index, int64_t now) {
    Slot& slot = slots_[index];
    slot.started_ns = now;
    slot.sent = 0;
    slot.received = 0;
    slot.fd =
        UniqueFd(socket(options_.address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!slot.fd) {
      fail(index, counters_.connect_errors, "socket", errno);
      return;
    }
    const int one = 1;
    setsockopt(slot.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const linger reset_on_close{1, 0};
    setsockopt(slot.fd.get(), SOL_SOCKET, SO_LINGER, &reset_on_close, sizeof reset_on_close);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT | EPOLLET;  // one epoll_ctl per connection
    event.data.u64 = index;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, slot.fd.get(), &event) != 0) {
      fail(index, counters_.connect_errors, "epoll_ctl", errno);
      return;
    }
    if (connect(slot.fd.get(), options_.address.get(), options_.address.length()) == 0) {
      slot.state = State::kEchoing;
      send_rest(index);
    } else if (errno == EINPROGRESS) {
      slot.state = State::kConnecting;
    } else {
      fail(index, counters_.connect_errors, "connect", errno);
    }
  }

  void on_event(size_t index, uint32_t events) {
    Slot& slot = slots_[index];
    if (slot.state == State::kConnecting) {
      int error = 0;
      socklen_t length = sizeof error;
      if (getsockopt(slot.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) {
        fail(index, counters_.connect_errors, "connect", error);
        return;
      }
      if ((events & (EPOLLOUT | EPOLLIN)) == 0) return;
      slot.state = State::kEchoing;
      if (!send_rest(index)) return;
    }
    if (slot.state != State::kEchoing) return;
    if ((events & EPOLLOUT) != 0 && !send_rest(index)) return;
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) receive(index);
  }

  // Sends what is left of the message; false if the slot failed.
  bool send_rest(size_t index) {
    Slot& slot = slots_[index];
    while (slot.sent < options_.size) {
      const ssize_t n =
          send(slot.fd.get(), message(slot) + slot.sent, options_.size - slot.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return true;  // edge-triggered: EPOLLOUT comes with room
        fail(index, counters_.closed_errors, "send", errno);
        return false;
      }
      slot.sent += static_cast<size_t>(n);
    }
    return true;
  }

  void receive(size_t index) {
    Slot& slot = slots_[index];
    for (;;) {  // edge-triggered: read until EAGAIN
      const ssize_t n = recv(slot.fd.get(), scratch_.data(), scratch_.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;
        fail(index, counters_.closed_errors, "recv", errno);
        return;
      }
      if (n == 0) {
        fail(index, counters_.closed_errors, "recv", ECONNRESET);
        return;
      }
      const auto got = static_cast<size_t>(n);
      if (slot.received + got > slot.sent ||
          std::memcmp(message(slot) + slot.received, scratch_.data(), got) != 0) {
        report(slot, "verification error: echoed bytes differ from those sent", 0);
        counters_.verify_errors.fetch_add(1, std::memory_order_relaxed);
        restart_later(index);
        return;
      }
      slot.received += got;
      if (slot.received == options_.size) {
        finish(index);
        return;
      }
    }
  }

  void finish(size_t index) {
    Slot& slot = slots_[index];
    const int64_t now = now_ns();
    if (now >= shared_.record_start_ns) {
      histogram_.record(now - slot.started_ns);
      counters_.cycles.fetch_add(1, std::memory_order_relaxed);
    }
    slot.fd.reset();  // RST: the server's next read ends the connection
    ++slot.cycle;
    start(index, now);
  }

  void fail(size_t index, std::atomic<uint64_t>& counter, const char* what, int error) {
    Slot& slot = slots_[index];
    if (now_ns() < shared_.end_ns && !shared_.stop.load(std::memory_order_relaxed)) {
      counter.fetch_add(1, std::memory_order_relaxed);
      report(slot, what, error);
    }
    restart_later(index);
  }

  void restart_later(size_t index) {
    Slot& slot = slots_[index];
    slot.fd.reset();
    ++slot.cycle;
    slot.state = State::kWaitingRetry;
    slot.retry_at_ns = now_ns() + kChurnRetryBackoffNs;
    retries_.push_back(index);
  }

  void retry_due(int64_t now) {
    size_t kept = 0;
    for (size_t index : retries_) {
      if (slots_[index].retry_at_ns <= now) {
        start(index, now);
      } else {
        retries_[kept++] = index;
      }
    }
    retries_.resize(kept);
  }

  void report(const Slot& slot, const char* what, int error) {
    if (shared_.reported_errors.fetch_add(1) >= kChurnMaxReportedErrors) return;
    std::fprintf(stderr, "bench_client: %s: slot %d connection %" PRIu64 ": %s%s\n",
                 options_.target.c_str(), slot.id, slot.cycle, what,
                 error != 0 ? (std::string(" failed: ") + std::strerror(error)).c_str() : "");
  }

  const ChurnOptions& options_;
  ChurnShared& shared_;
  ChurnCounters& counters_;
  const PatternTable& pattern_;
  UniqueFd epoll_;
  std::vector<Slot> slots_;
  std::vector<size_t> retries_;
  std::vector<char> scratch_;
  Histogram histogram_;
};

}  // namespace

std::unique_ptr<PingpongThread> make_legacy_epoll_pingpong(Shared& shared, Counters& counters,
                                                           const PatternTable& pattern, int first,
                                                           int step) {
  return std::make_unique<LegacyEpollPingpong>(shared, counters, pattern, first, step);
}

std::unique_ptr<ChurnThread> make_legacy_epoll_churn(const ChurnOptions& options,
                                                     ChurnShared& shared, ChurnCounters& counters,
                                                     const PatternTable& pattern, int first,
                                                     int step) {
  return std::make_unique<LegacyEpollChurn>(options, shared, counters, pattern, first, step);
}

}  // namespace bench
