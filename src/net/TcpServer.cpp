#include "ucp/net/TcpServer.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"

#include "RingHandOff.h"

namespace ucp {

/// Per-worker state, touched only on that worker's thread (after creation).
struct TcpServer::Worker {
  EventLoop* loop = nullptr;
  size_t index = 0;
  ConnectionNode* connections = nullptr;  // live connections, for draining at shutdown
  bool draining = false;
};

TcpServer::TcpServer(const ServerOptions& options, const LoopOptions& loop_options, Handler handler)
    : options_(options), loop_options_(loop_options), handler_(std::move(handler)) {}

TcpServer::~TcpServer() {
  if (pool_) {
    pool_->stop_all();
    pool_->join();
  }
}

std::string TcpServer::start(std::string* warnings) {
  // An inherited listening socket is ours from here on, whatever fails next.
  UniqueFd inherited(options_.listen_fd);
  std::optional<InetAddress> address;
  if (inherited) {
    if (auto checked = check_listening_tcp_socket(inherited.get()); !checked) {
      return "inherited socket (fd " + std::to_string(inherited.get()) +
             ") is not a listening TCP socket: " + checked.error().message();
    }
  } else {
    address = InetAddress::parse(options_.ip, options_.port);
    if (!address) return "server.ip: '" + options_.ip + "' is not a numeric IPv4/IPv6 address";
  }

  // The main loop only accepts: it needs no provided or registered buffers of its own.
  LoopOptions main_options = loop_options_;
  main_options.provided_buffers_count = 0;
  main_options.registered_buffers_count = 0;
  main_options.ring_entries = std::min<uint32_t>(loop_options_.ring_entries, 1024);
  std::string notes;
  auto main_loop = EventLoop::create(main_options, &notes);
  if (!main_loop) return EventLoop::describe_setup_error(main_loop.error(), main_options);
  main_loop_ = std::move(*main_loop);

  if (inherited) {
    listen_fd_ = std::move(inherited);
    local_ = InetAddress::local_of(listen_fd_.get()).value_or(InetAddress{});
  } else {
    auto listening = listen_on(*address, options_.listen);
    if (!listening) {
      if (listening.error() == std::errc::address_in_use) {
        return "cannot listen on " + address->to_string() +
               ": address already in use; stop the other server or choose another server.port";
      }
      return "cannot listen on " + address->to_string() + ": " + listening.error().message();
    }
    listen_fd_ = std::move(*listening);
    local_ = InetAddress::local_of(listen_fd_.get()).value_or(*address);
  }

  main_loop_->attach(listen_fd_.get());

  // Worker loops share the main loop's kernel-side workers where the backend can (io_uring
  // SQPOLL: one poller thread for every ring).
  pool_ =
      std::make_unique<EventLoopThreadPool>(options_.thread_num, loop_options_, main_loop_.get());
  std::string worker_notes;
  if (auto error = pool_->start(&worker_notes); !error.empty()) return error;
  // The loops warn alike (e.g. the fallback to epoll where io_uring is blocked): say it once.
  for (size_t begin = 0; begin < worker_notes.size();) {
    size_t end = worker_notes.find('\n', begin);
    end = end == std::string::npos ? worker_notes.size() : end + 1;
    const std::string line = worker_notes.substr(begin, end - begin);
    if (notes.find(line) == std::string::npos) notes += line;
    begin = end;
  }
  for (const auto& loop : pool_->loops()) {
    auto worker = std::make_unique<Worker>();
    worker->loop = loop.get();
    worker->index = workers_.size();
    workers_.push_back(std::move(worker));
  }
  if (options_.msg_ring_handoff && !main_loop_->capabilities().ring_messages) {
    notes += std::string("msg_ring_handoff: the ") + main_loop_->backend_name() +
             " backend has no ring messages (io_uring 5.18+ has IORING_OP_MSG_RING); handing "
             "connections to workers through the task queue + eventfd\n";
  } else if (options_.msg_ring_handoff) {
    std::vector<EventLoop*> loops;
    for (auto& worker : workers_) loops.push_back(worker->loop);
    ring_hand_off_ = std::make_unique<RingHandOff>(*main_loop_, std::move(loops), this,
                                                   &deliver_from_ring, &fall_back_from_ring);
  }
  if (warnings) *warnings += notes;
  return {};
}

uint64_t TcpServer::ring_hand_offs() const noexcept {
  return ring_hand_off_ ? ring_hand_off_->delivered() : 0;
}

std::string TcpServer::describe_loops() const {
  if (workers_.empty()) return main_loop_ ? main_loop_->describe() : std::string("not started");
  return std::to_string(workers_.size()) + " worker loop(s), " + workers_.front()->loop->describe();
}

void TcpServer::run() {
  main_loop_->spawn(accept_connections());
  main_loop_->run();
  pool_->stop_all();
  pool_->join();
}

void TcpServer::stop() noexcept {
  if (stop_requested_.exchange(true)) return;
  main_loop_->post([this] { main_loop_->spawn(shutdown_sequence()); });
}

void TcpServer::stop_now() noexcept {
  stop_now_.store(true);
  stop();  // starts the shutdown if it has not started; it then does not wait
}

bool TcpServer::warn_allowed(std::chrono::steady_clock::time_point& last) noexcept {
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(1)) return false;
  last = now;
  return true;
}

void TcpServer::on_multishot_accept(void* self, int fd) noexcept {
  io::Accepted accepted;
  accepted.fd = UniqueFd(fd);
  static_cast<TcpServer*>(self)->hand_off(std::move(accepted));  // peer: asked lazily
}

Task<> TcpServer::accept_connections() {
  if (ring_hand_off_) co_await ring_hand_off_->probe(shutting_down_);
  if (main_loop_->capabilities().multishot_accept) {
    co_await multishot_accept_loop();
  } else {
    co_await accept_loop();
  }
}

Task<> TcpServer::multishot_accept_loop() {
  io::MultishotAccept acceptor(*main_loop_, listen_fd_.get(), this, &on_multishot_accept);
  while (!shutting_down_) {
    accept_waiting_ = true;
    auto ended = co_await acceptor;  // accepts until the kernel ends the multishot
    accept_waiting_ = false;
    if (shutting_down_) break;
    if (!ended) co_await accept_backoff(ended.error());
  }
}

Task<> TcpServer::accept_backoff(std::error_code error) {
  if (error == std::errc::too_many_files_open ||
      error == std::errc::too_many_files_open_in_system || error == std::errc::no_buffer_space ||
      error == std::errc::not_enough_memory) {
    // Out of fds: retrying at once would spin (docs/design.md, pitfall 8). Back off, warn once
    // a second.
    if (warn_allowed(last_fd_warning_)) {
      LOG_WARN("accept: {} ({} connections open); pausing accepts for 100 ms", error.message(),
               live_.load());
    }
    co_await io::sleep_for(*main_loop_, std::chrono::milliseconds(100));
  } else if (error == std::errc::resource_unavailable_try_again) {  // our SQ + pending full
    co_await io::sleep_for(*main_loop_, std::chrono::milliseconds(1));
  } else {
    LOG_DEBUG("accept: {}", error.message());  // ECONNABORTED and friends: the peer left
  }
}

Task<> TcpServer::accept_loop() {
  while (!shutting_down_) {
    accept_waiting_ = true;
    auto accepted = co_await io::accept(*main_loop_, listen_fd_.get());
    accept_waiting_ = false;
    if (accepted) {
      hand_off(std::move(*accepted));
      continue;
    }
    if (shutting_down_ || accepted.error() == std::errc::operation_canceled) break;
    co_await accept_backoff(accepted.error());
  }
}

void TcpServer::hand_off(io::Accepted accepted) {
  if (live_.load(std::memory_order_relaxed) >= options_.max_connections) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    if (warn_allowed(last_limit_warning_)) {
      LOG_WARN("max_connections ({}) reached: closing new connections at once ({} so far)",
               options_.max_connections, rejected_.load());
    }
    return;  // ~UniqueFd closes it
  }
  live_.fetch_add(1, std::memory_order_relaxed);
  Worker& worker = *workers_[next_worker_];
  next_worker_ = (next_worker_ + 1) % workers_.size();
  if (ring_hand_off_ && ring_hand_off_->send(worker.index, accepted.fd)) return;
  post_to_worker(worker, std::move(accepted));
}

void TcpServer::post_to_worker(Worker& worker, io::Accepted accepted) {
  worker.loop->post([this, &worker, conn = std::move(accepted)]() mutable {
    worker.loop->spawn(serve(worker, std::move(conn)));
  });
}

void TcpServer::deliver_from_ring(void* self, size_t index, UniqueFd fd, bool closing) {
  auto& server = *static_cast<TcpServer*>(self);
  Worker& worker = *server.workers_[index];
  if (closing) {  // on its way while this worker shut down: close it
    server.live_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  io::Accepted accepted;
  accepted.fd = std::move(fd);
  worker.loop->spawn(server.serve(worker, std::move(accepted)));
}

void TcpServer::fall_back_from_ring(void* self, size_t index, UniqueFd fd) {
  auto& server = *static_cast<TcpServer*>(self);
  io::Accepted accepted;
  accepted.fd = std::move(fd);
  server.post_to_worker(*server.workers_[index], std::move(accepted));
}

Task<> TcpServer::serve(Worker& worker, io::Accepted accepted) {
  if (options_.tcp_nodelay) set_tcp_nodelay(accepted.fd.get(), true);
  if (accepted.peer.ss_family == AF_UNSPEC) {  // multishot accept returns no address
    socklen_t length = sizeof accepted.peer;
    ::getpeername(accepted.fd.get(), reinterpret_cast<sockaddr*>(&accepted.peer), &length);
  }
  TcpConnection connection(*worker.loop, std::move(accepted.fd), InetAddress(accepted.peer),
                           options_.read_timeout_ms,
                           OutputLimits{options_.max_output_bytes, options_.write_timeout_ms,
                                        options_.shutdown_timeout_ms});
  ConnectionNode node{&connection};
  node.next = worker.connections;
  if (node.next) node.next->prev = &node;
  worker.connections = &node;
  if (worker.draining) connection.stop_reading();
  try {
    co_await handler_(connection);
  } catch (const std::exception& e) {
    LOG_ERROR("connection {}: handler failed: {}", connection.peer().to_string(), e.what());
  }
  co_await connection.close();
  if (node.prev) node.prev->next = node.next;
  if (node.next) node.next->prev = node.prev;
  if (worker.connections == &node) worker.connections = node.next;
  live_.fetch_sub(1, std::memory_order_relaxed);
}

Task<> TcpServer::shutdown_sequence() {
  shutting_down_ = true;
  LOG_INFO("shutting down: {} connections open", live_.load());
  if (accept_waiting_) (void)co_await io::cancel_fd(*main_loop_, listen_fd_.get());
  main_loop_->detach(listen_fd_.get());
  listen_fd_.reset();  // new connection attempts are refused from here on
  // Drain: every handler's next (or current) read ends with operation_canceled, while the
  // writes of what it has already read go on; its close() then flushes queued output. A
  // peer that stops reading holds its connection until the deadline below at most.
  for (auto& worker : workers_) {
    Worker* w = worker.get();
    w->loop->post([w] {
      w->draining = true;
      for (ConnectionNode* node = w->connections; node; node = node->next) {
        node->connection->stop_reading();
      }
    });
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.shutdown_timeout_ms);
  while (live_.load() > 0 && std::chrono::steady_clock::now() < deadline && !stop_now_.load()) {
    co_await io::sleep_for(*main_loop_, std::chrono::milliseconds(5));
  }
  if (live_.load() > 0 && stop_now_.load()) {
    LOG_WARN("stopping at once: cancelling {} connections", live_.load());
  } else if (live_.load() > 0) {
    LOG_WARN("shutdown_timeout_ms ({}) passed with {} connections open: cancelling them",
             options_.shutdown_timeout_ms, live_.load());
  }
  pool_->stop_all();  // each worker cancels and reaps what is left, then returns
  main_loop_->stop();
}

}  // namespace ucp
