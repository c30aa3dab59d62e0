// epoll_echo: the classic reactor echo server every UCP figure is quoted against.
//
//   epoll_echo -p PORT [-t THREADS]
//
// One event loop per thread (muduo style), each with its own epoll set, its own listening socket
// (SO_REUSEPORT when THREADS > 1, so the kernel spreads connections and no fd crosses threads)
// and the connections it accepted. Level-triggered: a readable connection gets one recv into the
// loop's 64 KiB buffer (again only if that filled it), and the bytes go straight back with one
// send. Only what the socket refuses is copied into the connection's output buffer; then EPOLLOUT
// is armed and EPOLLIN dropped until it drains (back-pressure). Per request: one recv, one send,
// and a share of one epoll_wait. Nothing is printed per request. SIGINT/SIGTERM stop it.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr size_t kReadBufferSize = 64 * 1024;
constexpr int kMaxEvents = 1024;
constexpr size_t kHighWatermark = 4 * 1024 * 1024;  // stop reading while this much is unsent

/// One accepted connection; owned by the loop that accepted it and closed by it.
struct Connection {
  int fd = -1;
  std::vector<char> output;  // bytes the socket refused, sent on EPOLLOUT
  size_t output_offset = 0;
  bool writing = false;  // EPOLLOUT armed (and EPOLLIN dropped)
};

/// One thread's reactor: epoll set, listening socket, wake-up eventfd and connections.
class EventLoop {
 public:
  EventLoop(int listen_fd, std::atomic<bool>& stop) : listen_fd_(listen_fd), stop_(stop) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop() {
    for (auto& conn : connections_) {
      if (conn) ::close(conn->fd);
    }
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    ::close(listen_fd_);
  }

  bool init() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) return false;
    return add(listen_fd_, EPOLLIN) && add(wake_fd_, EPOLLIN);
  }

  /// Safe to call from any thread: makes run() return.
  void wake() const noexcept {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }

  void run() {
    std::vector<epoll_event> events(kMaxEvents);
    while (!stop_.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(epoll_fd_, events.data(), kMaxEvents, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("epoll_echo: epoll_wait");
        return;
      }
      for (int i = 0; i < n; ++i) {
        const epoll_event& event = events[static_cast<size_t>(i)];
        const int fd = event.data.fd;
        if (fd == listen_fd_) {
          accept_all();
        } else if (fd != wake_fd_) {
          Connection* conn = connection(fd);
          if (conn != nullptr) on_event(*conn, event.events);
        }
      }
    }
  }

 private:
  bool add(int fd, uint32_t events) {
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) == 0;
  }

  void modify(int fd, uint32_t events) {
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
  }

  Connection* connection(int fd) {
    const auto index = static_cast<size_t>(fd);
    return index < connections_.size() ? connections_[index].get() : nullptr;
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN) std::perror("epoll_echo: accept4");
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const auto index = static_cast<size_t>(fd);
      if (index >= connections_.size()) connections_.resize(std::max(index + 1, 2 * index));
      connections_[index] = std::make_unique<Connection>();
      connections_[index]->fd = fd;
      if (!add(fd, EPOLLIN)) close_connection(*connections_[index]);
    }
  }

  void on_event(Connection& conn, uint32_t events) {
    if (conn.writing && (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) {
      if (!drain_output(conn)) return;
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !conn.writing) on_readable(conn);
  }

  void on_readable(Connection& conn) {
    for (;;) {
      const ssize_t n = recv(conn.fd, buffer_.data(), buffer_.size(), 0);
      if (n > 0) {
        const auto length = static_cast<size_t>(n);
        if (!echo(conn, length)) return;
        if (length < buffer_.size() || conn.writing) return;  // drained, or back-pressure
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      close_connection(conn);  // EOF or error
      return;
    }
  }

  // Sends what was read; keeps what the socket refused. False when the connection was closed.
  bool echo(Connection& conn, size_t length) {
    size_t sent = 0;
    while (sent < length) {
      const ssize_t n = send(conn.fd, buffer_.data() + sent, length - sent, MSG_NOSIGNAL);
      if (n >= 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      close_connection(conn);
      return false;
    }
    if (sent < length) {
      conn.output.insert(conn.output.end(), buffer_.data() + sent, buffer_.data() + length);
      if (!conn.writing) {
        conn.writing = true;
        modify(conn.fd, EPOLLOUT);  // back-pressure: no reading until the output drains
      }
    }
    return true;
  }

  bool drain_output(Connection& conn) {
    while (conn.output_offset < conn.output.size()) {
      const ssize_t n = send(conn.fd, conn.output.data() + conn.output_offset,
                             conn.output.size() - conn.output_offset, MSG_NOSIGNAL);
      if (n >= 0) {
        conn.output_offset += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return true;
      close_connection(conn);
      return false;
    }
    conn.output.clear();
    conn.output_offset = 0;
    conn.writing = false;
    modify(conn.fd, EPOLLIN);
    return true;
  }

  void close_connection(Connection& conn) {
    const int fd = conn.fd;
    ::close(fd);  // also leaves the epoll set
    connections_[static_cast<size_t>(fd)].reset();
  }

  int listen_fd_;
  std::atomic<bool>& stop_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::vector<std::unique_ptr<Connection>> connections_;  // indexed by fd
  std::vector<char> buffer_ = std::vector<char>(kReadBufferSize);
};

int listen_on(uint16_t port, bool reuse_port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: epoll_echo -p PORT [-t THREADS]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0;
  long threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-p") {
      port = std::strtol(argv[i + 1], nullptr, 10);
    } else if (flag == "-t") {
      threads = std::strtol(argv[i + 1], nullptr, 10);
    } else {
      usage();
    }
  }
  if (argc % 2 == 0 || port <= 0 || port > 65535 || threads < 1 || threads > 256) usage();

  rlimit limit{};  // as many connections as the hard limit allows
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  // The loops never see a signal: the main thread waits for it and wakes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<EventLoop>> loops;
  for (long t = 0; t < threads; ++t) {
    const int listen_fd = listen_on(static_cast<uint16_t>(port), threads > 1);
    if (listen_fd < 0) {
      std::fprintf(stderr, "epoll_echo: cannot listen on port %ld: %s\n", port,
                   std::strerror(errno));
      return 1;
    }
    loops.push_back(std::make_unique<EventLoop>(listen_fd, stop));
    if (!loops.back()->init()) {
      std::perror("epoll_echo: epoll/eventfd");
      return 1;
    }
  }
  std::vector<std::thread> workers;
  for (auto& loop : loops) workers.emplace_back([&loop] { loop->run(); });

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  stop.store(true);
  for (auto& loop : loops) loop->wake();
  for (auto& worker : workers) worker.join();
  return 0;
}
