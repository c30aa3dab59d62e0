// TcpServer: start, run, stop, drain and the shutdown sequence, description and statistics.
// The acceptors and the way of an accepted connection to its worker have a file each
// (TcpServerState.h lists them).

#include "ucp/net/TcpServer.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include <sys/socket.h>

#include "ucp/io/ResumeOn.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"

#include "RingHandOff.h"
#include "TcpServerState.h"

namespace ucp {

TcpServer::TcpServer(const ServerOptions& options, const LoopOptions& loop_options, Handler handler)
    : options_(options),
      output_limits_{options.max_output_bytes, options.write_timeout_ms,
                     options.shutdown_timeout_ms},
      loop_options_(loop_options),
      handler_(std::move(handler)) {}

TcpServer::~TcpServer() {
  if (pool_) {
    pool_->stop_all();
    pool_->join();
  }
}

Result<void, Error> TcpServer::start(std::string* warnings) {
  // Inherited listening sockets are ours from here on, whatever fails next.
  std::vector<UniqueFd> inherited;
  for (int fd : options_.listen_fds) inherited.emplace_back(fd);
  std::optional<InetAddress> address;
  for (const UniqueFd& fd : inherited) {
    if (auto checked = check_listening_tcp_socket(fd.get()); !checked) {
      return Unexpected{Error("inherited socket (fd " + std::to_string(fd.get()) +
                                  ") is not a listening TCP socket: " + checked.error().message(),
                              checked.error())};
    }
  }
  if (inherited.empty()) {
    address = InetAddress::parse(options_.ip, options_.port);
    if (!address) {
      return Unexpected{Error("server.ip: '" + options_.ip + "' is not a numeric IPv4/IPv6 address",
                              std::make_error_code(std::errc::invalid_argument))};
    }
  }

  // The main loop only accepts: it needs no provided or registered buffers of its own.
  LoopOptions main_options = loop_options_;
  main_options.provided_buffers_count = 0;
  main_options.registered_buffers_count = 0;
  main_options.ring_entries = std::min<uint32_t>(loop_options_.ring_entries, 1024);
  // Nor does it busy-poll: it accepts now and then, and a spin there would take CPU time from
  // the workers that serve the requests.
  main_options.busy_poll_us = 0;
  std::string notes;
  auto main_loop = EventLoop::create(main_options, &notes);
  if (!main_loop) {
    return Unexpected{
        Error(EventLoop::describe_setup_error(main_loop.error(), main_options), main_loop.error())};
  }
  main_loop_ = std::move(*main_loop);

  acceptors_ = options_.acceptors;
  UniqueFd main_listener;
  if (!inherited.empty()) {
    local_ = InetAddress::local_of(inherited.front().get()).value_or(InetAddress{});
  } else if (acceptors_ == Acceptors::kMain) {
    // Bound now (a port in use fails before the workers are set up), listening only once
    // they are: until then a client is refused instead of waiting in the listen queue for
    // a server that cannot serve it yet.
    auto bound = bind_listener(*address, options_.listen);
    if (!bound) return detail::describe_listen_error(*address, bound.error());
    main_listener = std::move(*bound);
    local_ = InetAddress::local_of(main_listener.get()).value_or(*address);
  }

  // Worker loops share the main loop's kernel-side workers where the backend can (io_uring
  // SQPOLL: one poller thread for every ring).
  pool_ = std::make_unique<EventLoopThreadPool>(options_.thread_num, loop_options_,
                                                main_loop_.get(), options_.cpu_affinity);
  std::string worker_notes;
  if (auto started = pool_->start(&worker_notes); !started) return started;
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
  if (!inherited.empty()) {
    adopt_listeners(std::move(inherited), notes);
  } else if (acceptors_ == Acceptors::kPerWorker) {
    if (auto listening = listen_per_worker(*address, notes); !listening) return listening;
  } else {
    if (auto listening = start_listening(main_listener.get(), options_.listen); !listening) {
      return detail::describe_listen_error(local_, listening.error());
    }
    auto acceptor = std::make_unique<Acceptor>();
    acceptor->server = this;
    acceptor->loop = main_loop_.get();
    acceptor->listen_fd = std::move(main_listener);
    detail::LoopAccess::attach(*main_loop_, acceptor->listen_fd.get());
    acceptor_list_.push_back(std::move(acceptor));
  }
  if (acceptors_ == Acceptors::kMain && options_.msg_ring_handoff &&
      !main_loop_->capabilities().ring_messages) {
    notes += std::string("msg_ring_handoff: the ") + main_loop_->backend_name() +
             " backend has no ring messages (io_uring 5.18+ has IORING_OP_MSG_RING); handing "
             "connections to workers through the task queue + eventfd\n";
  } else if (acceptors_ == Acceptors::kMain && options_.msg_ring_handoff) {
    std::vector<EventLoop*> loops;
    for (auto& worker : workers_) loops.push_back(worker->loop);
    ring_hand_off_ = std::make_unique<detail::RingHandOff>(
        *main_loop_, std::move(loops), this, &deliver_from_ring, &fall_back_from_ring);
  }
  listeners_open_.store(acceptor_list_.size());
  pool_->place_main_thread();  // this thread runs the main loop (see the thread contract)
  if (warnings) *warnings += notes;
  return {};
}

uint64_t TcpServer::ring_hand_offs() const noexcept {
  return ring_hand_off_ ? ring_hand_off_->delivered() : 0;
}

std::vector<EventLoop*> TcpServer::worker_loops() const {
  std::vector<EventLoop*> loops;
  loops.reserve(workers_.size());
  for (const auto& worker : workers_) loops.push_back(worker->loop);
  return loops;
}

std::string TcpServer::describe_loops() const {
  if (workers_.empty()) return main_loop_ ? main_loop_->describe() : std::string("not started");
  std::string text =
      std::to_string(workers_.size()) + " worker loop(s), " + workers_.front()->loop->describe();
  if (acceptors_ == Acceptors::kPerWorker) {
    text += "; acceptors: per_worker (each worker accepts on its own SO_REUSEPORT socket)";
  }
  return text + "; " + pool_->describe_placement();
}

void TcpServer::run() {
  bool main_accepts = false;
  for (auto& acceptor : acceptor_list_) {
    Acceptor* a = acceptor.get();
    if (a->loop == main_loop_.get()) {
      main_accepts = true;
      continue;
    }
    a->loop->post([this, a] {
      detail::LoopAccess::attach(*a->loop, a->listen_fd.get());
      a->loop->spawn(accept_connections(*a));
    });
  }
  if (main_accepts) main_loop_->spawn(start_main_acceptors());
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

void TcpServer::drain() noexcept {
  if (draining_.exchange(true) || stop_requested_.load()) return;
  main_loop_->post([this] { main_loop_->spawn(close_acceptors()); });
}

std::vector<int> TcpServer::listening_fds() const {
  std::vector<int> fds;
  if (draining_.load() || stop_requested_.load()) return fds;
  for (const auto& acceptor : acceptor_list_) {
    if (acceptor->listen_fd) fds.push_back(acceptor->listen_fd.get());
  }
  return fds;
}

Task<ServerStats> TcpServer::collect_stats() {
  ServerStats stats;
  stats.main_loop = main_loop_->stats();
  stats.connections_rejected = rejected_.load(std::memory_order_relaxed);
  // The shutdown stops the workers only once no collection is away on one (it waits for
  // stats_collections_ to drop to 0): a hop to a stopped loop would never come back.
  if (shutting_down_) co_return stats;
  ++stats_collections_;
  stats.workers.reserve(workers_.size());
  for (auto& worker : workers_) {
    co_await resume_on(*worker->loop);
    stats.workers.push_back(worker->counters());
  }
  co_await resume_on(*main_loop_);
  --stats_collections_;
  co_return stats;
}

Task<> TcpServer::shutdown_sequence() {
  shutting_down_ = true;
  LOG_INFO("shutting down: {} connections open", live_.load());
  for (auto& acceptor : acceptor_list_) {
    if (acceptor->loop == main_loop_.get()) co_await close_acceptor(*acceptor);
  }
  // Drain: every handler's next (or current) read ends with operation_canceled, while the
  // writes of what it has already read go on; its close() then flushes queued output. A
  // peer that stops reading holds its connection until the deadline below at most.
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    Acceptor* own = acceptors_ == Acceptors::kPerWorker ? acceptor_list_[i].get() : nullptr;
    w->loop->post([this, w, own] {
      if (own != nullptr) w->loop->spawn(close_acceptor(*own));
      w->draining = true;
      for (ConnectionNode* node = w->connections; node; node = node->next) {
        node->connection->stop_reading();
      }
    });
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.shutdown_timeout_ms);
  while ((live_.load() > 0 || listeners_open_.load() > 0 || stats_collections_ > 0) &&
         std::chrono::steady_clock::now() < deadline && !stop_now_.load()) {
    co_await io::sleep_for(*main_loop_, std::chrono::milliseconds(5));
  }
  if (live_.load() > 0 && stop_now_.load()) {
    LOG_WARN("stopping at once: cancelling {} connections", live_.load());
  } else if (live_.load() > 0) {
    LOG_WARN("shutdown_timeout_ms ({}) passed with {} connections open: cancelling them",
             options_.shutdown_timeout_ms, live_.load());
  }
  // A stats collection still away on a worker comes back within one of its iterations.
  while (stats_collections_ > 0) co_await io::sleep_for(*main_loop_, std::chrono::milliseconds(1));
  pool_->stop_all();  // each worker cancels and reaps what is left, then returns
  main_loop_->stop();
}

}  // namespace ucp
