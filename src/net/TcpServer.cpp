#include "ucp/net/TcpServer.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include <sys/socket.h>

#include "ucp/io/ResumeOn.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"
#include "ucp/net/SocketActivation.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsSession.h"

#include "RingHandOff.h"
#include "TlsConnection.h"

namespace ucp {
namespace {

Unexpected<Error> describe_listen_error(const InetAddress& address, std::error_code error) {
  if (error == std::errc::address_in_use) {
    return Unexpected{Error("cannot listen on " + address.to_string() +
                                ": address already in use; stop the other server or choose "
                                "another server.port",
                            error)};
  }
  return Unexpected{
      Error("cannot listen on " + address.to_string() + ": " + error.message(), error)};
}

}  // namespace

/// Per-worker state, touched only on that worker's thread (after creation). The counters
/// are plain integers: collect_stats() reads them on this thread.
struct TcpServer::Worker {
  EventLoop* loop = nullptr;
  size_t index = 0;
  ConnectionNode* connections = nullptr;  // live connections, for draining and stats
  bool draining = false;
  uint64_t open = 0;
  uint64_t accepted = 0;
  uint64_t closed_bytes_received = 0;  // by connections that have closed
  uint64_t closed_bytes_sent = 0;
  // TLS: this worker's copy of the current context, taken again when the holder's generation
  // changes (a reload), so that a connection costs no lock; and its handshake counters,
  // written here with relaxed stores and read by tls_counters() from any thread.
  std::shared_ptr<const tls::TlsContext> tls_context;
  uint64_t tls_generation = 0;
  tls::TlsCounters tls_counters;

  WorkerCounters counters() const {
    WorkerCounters out;
    out.connections_open = open;
    out.connections_accepted = accepted;
    out.bytes_received = closed_bytes_received;
    out.bytes_sent = closed_bytes_sent;
    for (const ConnectionNode* node = connections; node; node = node->next) {
      out.bytes_received += node->connection->bytes_read();
      out.bytes_sent += node->connection->bytes_written();
    }
    out.loop = loop->stats();
    return out;
  }
};

/// One listening socket and the loop that accepts on it: the main loop (worker == nullptr:
/// connections are handed off) or a worker (it serves what it accepts). Touched only on
/// `loop`'s thread once the server runs.
struct TcpServer::Acceptor {
  TcpServer* server = nullptr;
  EventLoop* loop = nullptr;
  Worker* worker = nullptr;
  UniqueFd listen_fd;
  bool stopping = false;
  bool waiting = false;  // an accept is in flight: cancel it to stop
  std::chrono::steady_clock::time_point last_fd_warning{};
  std::chrono::steady_clock::time_point last_limit_warning{};
};

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
    if (!bound) return describe_listen_error(*address, bound.error());
    main_listener = std::move(*bound);
    local_ = InetAddress::local_of(main_listener.get()).value_or(*address);
  }

  // Worker loops share the main loop's kernel-side workers where the backend can (io_uring
  // SQPOLL: one poller thread for every ring).
  pool_ =
      std::make_unique<EventLoopThreadPool>(options_.thread_num, loop_options_, main_loop_.get());
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
      return describe_listen_error(local_, listening.error());
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
  if (warnings) *warnings += notes;
  return {};
}

// Sockets this process did not bind (socket activation, a takeover): one per worker when
// per_worker asks for it and there are as many as workers, else all on the main loop.
void TcpServer::adopt_listeners(std::vector<UniqueFd> sockets, std::string& notes) {
  if (acceptors_ == Acceptors::kPerWorker && sockets.size() != workers_.size()) {
    notes += "server.acceptors = per_worker: " + std::to_string(sockets.size()) +
             " inherited listening socket(s) for " + std::to_string(workers_.size()) +
             " worker(s) cannot be split per worker (a SO_REUSEPORT group is formed by sockets "
             "this process binds itself); the main loop accepts on them and hands connections "
             "to the workers\n";
    acceptors_ = Acceptors::kMain;
  }
  for (size_t i = 0; i < sockets.size(); ++i) {
    auto acceptor = std::make_unique<Acceptor>();
    acceptor->server = this;
    if (acceptors_ == Acceptors::kPerWorker) {
      acceptor->loop = workers_[i]->loop;
      acceptor->worker = workers_[i].get();
    } else {
      acceptor->loop = main_loop_.get();
      detail::LoopAccess::attach(*main_loop_, sockets[i].get());
    }
    acceptor->listen_fd = std::move(sockets[i]);
    acceptor_list_.push_back(std::move(acceptor));
  }
}

// One listening socket per worker, all in one SO_REUSEPORT group: the first binds the
// address as given (port 0: any free port), the others the port it got.
Result<void, Error> TcpServer::listen_per_worker(const InetAddress& address, std::string& notes) {
  InetAddress bind_to = address;
  if (!options_.listen.reuse_port) {
    // Nobody asked to share the port with other processes, but a SO_REUSEPORT bind would
    // quietly join another server's group on it: a plain bind first says whether the port
    // is free (and which one port 0 gives), as in the main-accepts mode.
    UniqueFd probe(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP));
    if (!probe) return describe_listen_error(address, error_from_errno(errno));
    if (::bind(probe.get(), address.get(), address.length()) != 0) {
      return describe_listen_error(address, error_from_errno(errno));
    }
    bind_to = InetAddress::local_of(probe.get()).value_or(address);
  }
  ListenOptions listen = options_.listen;
  listen.reuse_port = true;
  for (auto& worker : workers_) {
    auto listening = listen_on(bind_to, listen);
    if (!listening) {
      acceptor_list_.clear();
      return describe_listen_error(bind_to, listening.error());
    }
    if (acceptor_list_.empty()) {
      local_ = InetAddress::local_of(listening->get()).value_or(bind_to);
      bind_to = local_;
    }
    auto acceptor = std::make_unique<Acceptor>();
    acceptor->server = this;
    acceptor->loop = worker->loop;
    acceptor->worker = worker.get();
    acceptor->listen_fd = std::move(*listening);
    acceptor_list_.push_back(std::move(acceptor));
  }
  if (options_.msg_ring_handoff) {
    notes +=
        "msg_ring_handoff: unused with server.acceptors = per_worker (each worker accepts "
        "its own connections; nothing is handed off)\n";
  }
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
  return text;
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

// The main loop's acceptors start once the ring hand-off (if any) is known to work.
Task<> TcpServer::start_main_acceptors() {
  Acceptor& first = *acceptor_list_.front();
  if (ring_hand_off_) co_await ring_hand_off_->probe(first.stopping);
  for (auto& acceptor : acceptor_list_) {
    if (acceptor->loop == main_loop_.get() && !acceptor->stopping) {
      main_loop_->spawn(accept_connections(*acceptor));
    }
  }
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

// Each acceptor is closed on its own loop's thread.
Task<> TcpServer::close_acceptors() {
  LOG_INFO("draining: stopped accepting; {} connections open", live_.load());
  for (auto& acceptor : acceptor_list_) {
    Acceptor* a = acceptor.get();
    if (a->loop == main_loop_.get()) {
      co_await close_acceptor(*a);
    } else {
      a->loop->post([this, a] { a->loop->spawn(close_acceptor(*a)); });
    }
  }
}

bool TcpServer::warn_allowed(std::chrono::steady_clock::time_point& last) noexcept {
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(1)) return false;
  last = now;
  return true;
}

void TcpServer::on_multishot_accept(void* acceptor, int fd) noexcept {
  auto& self = *static_cast<Acceptor*>(acceptor);
  io::Accepted accepted;
  accepted.fd = UniqueFd(fd);
  self.server->on_accepted(self, std::move(accepted));  // peer: asked lazily
}

Task<> TcpServer::accept_connections(Acceptor& acceptor) {
  if (acceptor.loop->capabilities().multishot_accept) {
    co_await multishot_accept_loop(acceptor);
  } else {
    co_await accept_loop(acceptor);
  }
}

Task<> TcpServer::multishot_accept_loop(Acceptor& acceptor) {
  detail::MultishotAccept multishot(*acceptor.loop, acceptor.listen_fd.get(), &acceptor,
                                    &on_multishot_accept);
  while (!acceptor.stopping) {
    acceptor.waiting = true;
    auto ended = co_await multishot;  // accepts until the kernel ends the multishot
    acceptor.waiting = false;
    if (acceptor.stopping) break;
    if (!ended) co_await accept_backoff(acceptor, ended.error());
  }
}

Task<> TcpServer::accept_backoff(Acceptor& acceptor, std::error_code error) {
  if (error == std::errc::too_many_files_open ||
      error == std::errc::too_many_files_open_in_system || error == std::errc::no_buffer_space ||
      error == std::errc::not_enough_memory) {
    // Out of fds: retrying at once would spin (docs/design.md, pitfall 8). Back off, warn once
    // a second (per acceptor).
    if (warn_allowed(acceptor.last_fd_warning)) {
      LOG_WARN("accept: {} ({} connections open); pausing accepts for 100 ms", error.message(),
               live_.load());
    }
    co_await io::sleep_for(*acceptor.loop, std::chrono::milliseconds(100));
  } else if (error == std::errc::resource_unavailable_try_again) {  // our SQ + pending full
    co_await io::sleep_for(*acceptor.loop, std::chrono::milliseconds(1));
  } else {
    LOG_DEBUG("accept: {}", error.message());  // ECONNABORTED and friends: the peer left
  }
}

Task<> TcpServer::accept_loop(Acceptor& acceptor) {
  while (!acceptor.stopping) {
    acceptor.waiting = true;
    auto accepted = co_await io::accept(*acceptor.loop, acceptor.listen_fd.get());
    acceptor.waiting = false;
    if (accepted) {
      on_accepted(acceptor, std::move(*accepted));
      continue;
    }
    if (acceptor.stopping || accepted.error() == std::errc::operation_canceled) break;
    co_await accept_backoff(acceptor, accepted.error());
  }
}

// The one max_connections count across acceptors: counted first, then checked, so that two
// workers accepting at once cannot both take the last place.
bool TcpServer::admit(Acceptor& acceptor) {
  if (live_.fetch_add(1, std::memory_order_relaxed) < options_.max_connections) return true;
  live_.fetch_sub(1, std::memory_order_relaxed);
  const uint64_t rejected = rejected_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (warn_allowed(acceptor.last_limit_warning)) {
    LOG_WARN("max_connections ({}) reached: closing new connections at once ({} so far)",
             options_.max_connections, rejected);
  }
  return false;
}

void TcpServer::on_accepted(Acceptor& acceptor, io::Accepted accepted) {
  if (!admit(acceptor)) return;  // ~UniqueFd closes it
  const InetAddress peer(accepted.peer);
  if (acceptor.worker != nullptr) {
    acceptor.loop->spawn(start_serving(*acceptor.worker, std::move(accepted.fd), peer));
    return;
  }
  hand_off(std::move(accepted.fd), peer);
}

void TcpServer::hand_off(UniqueFd fd, const InetAddress& peer) {
  Worker& worker = *workers_[next_worker_];
  next_worker_ = (next_worker_ + 1) % workers_.size();
  if (ring_hand_off_ && ring_hand_off_->send(worker.index, fd)) return;
  post_to_worker(worker, std::move(fd), peer);
}

void TcpServer::post_to_worker(Worker& worker, UniqueFd fd, const InetAddress& peer) {
  worker.loop->post([this, &worker, fd = std::move(fd), peer]() mutable {
    worker.loop->spawn(start_serving(worker, std::move(fd), peer));
  });
}

void TcpServer::deliver_from_ring(void* self, size_t index, UniqueFd fd, bool closing) {
  auto& server = *static_cast<TcpServer*>(self);
  Worker& worker = *server.workers_[index];
  if (closing) {  // on its way while this worker shut down: close it
    server.live_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  worker.loop->spawn(server.start_serving(worker, std::move(fd), InetAddress()));
}

void TcpServer::fall_back_from_ring(void* self, size_t index, UniqueFd fd) {
  auto& server = *static_cast<TcpServer*>(self);
  server.post_to_worker(*server.workers_[index], std::move(fd), InetAddress());
}

// What serve() does outside the connection's lifetime is kept in plain functions: GCC keeps
// every local and temporary of a coroutine in its frame, and an idle connection is that frame.
void TcpServer::prepare_accepted(int fd, InetAddress& peer) const {
  if (options_.tcp_nodelay) set_tcp_nodelay(fd, true);
  if (peer.family() == AF_UNSPEC) {  // multishot accept returns no address
    if (auto asked = InetAddress::peer_of(fd)) peer = *asked;
  }
}

void TcpServer::log_handler_failure(const TcpConnection& connection, const char* what) {
  LOG_ERROR("connection {}: handler failed: {}", connection.peer().to_string(), what);
}

Spawned TcpServer::start_serving(Worker& worker, UniqueFd fd, InetAddress peer) {
  if (options_.tls) return serve_tls(worker, std::move(fd), peer);
  return serve(worker, std::move(fd), peer);
}

void TcpServer::enlist(Worker& worker, ConnectionNode& node) noexcept {
  node.next = worker.connections;
  if (node.next) node.next->prev = &node;
  worker.connections = &node;
  ++worker.open;
  ++worker.accepted;
  if (worker.draining) node.connection->stop_reading();
}

void TcpServer::delist(Worker& worker, ConnectionNode& node) noexcept {
  if (node.prev) node.prev->next = node.next;
  if (node.next) node.next->prev = node.prev;
  if (worker.connections == &node) worker.connections = node.next;
  --worker.open;
  worker.closed_bytes_received += node.connection->bytes_read();
  worker.closed_bytes_sent += node.connection->bytes_written();
  live_.fetch_sub(1, std::memory_order_relaxed);
}

Spawned TcpServer::serve(Worker& worker, UniqueFd fd, InetAddress peer) {
  prepare_accepted(fd.get(), peer);
  TcpConnection connection(*worker.loop, std::move(fd), peer, options_.read_timeout_ms,
                           output_limits_);
  ConnectionNode node{&connection};
  enlist(worker, node);
  try {
    co_await handler_(connection);
  } catch (const std::exception& e) {
    log_handler_failure(connection, e.what());
  }
  co_await connection.close();
  delist(worker, node);
}

// ---- TLS ----

namespace {

// A worker's TLS counters: written by the worker only, read by any thread. Each figure is
// stored and loaded on its own, relaxed (no locked instruction: one writer).
void add_relaxed(uint64_t& counter, uint64_t n) noexcept {
  if (n == 0) return;
  std::atomic_ref<uint64_t> figure(counter);
  figure.store(figure.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

uint64_t load_relaxed(const uint64_t& counter) noexcept {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(counter)).load(std::memory_order_relaxed);
}

template <class Apply>
void for_each_figure(tls::TlsCounters& a, const tls::TlsCounters& b, Apply apply) noexcept {
  apply(a.handshakes_ok, b.handshakes_ok);
  for (size_t i = 0; i < a.handshakes_failed.size(); ++i) {
    apply(a.handshakes_failed[i], b.handshakes_failed[i]);
  }
  apply(a.resumed, b.resumed);
  apply(a.tls1_2, b.tls1_2);
  apply(a.tls1_3, b.tls1_3);
  for (size_t i = 0; i < a.alpn.size(); ++i) apply(a.alpn[i], b.alpn[i]);
  apply(a.no_alpn, b.no_alpn);
}

}  // namespace

const tls::TlsContext* TcpServer::tls_context_for(Worker& worker) {
  const uint64_t generation = options_.tls->generation();
  if (generation != worker.tls_generation) {
    worker.tls_context = options_.tls->current();
    worker.tls_generation = generation;
  }
  return worker.tls_context.get();
}

void TcpServer::count_handshake(Worker& worker, const TcpConnection& connection,
                                std::error_code failure) noexcept {
  tls::TlsCounters delta;
  if (failure) {
    delta.record_failure(failure);
  } else {
    delta.record(*connection.tls());
  }
  for_each_figure(worker.tls_counters, delta,
                  [](uint64_t& total, uint64_t n) { add_relaxed(total, n); });
}

std::vector<tls::TlsCounters> TcpServer::tls_counters() const {
  std::vector<tls::TlsCounters> all(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    for_each_figure(all[i], workers_[i]->tls_counters,
                    [](uint64_t& copy, const uint64_t& figure) { copy = load_relaxed(figure); });
  }
  return all;
}

Spawned TcpServer::serve_tls(Worker& worker, UniqueFd fd, InetAddress peer) {
  // Nagle would hold each flight of the handshake back until the peer's delayed ACK.
  set_tcp_nodelay(fd.get(), true);
  prepare_accepted(fd.get(), peer);
  const tls::TlsContext* context = tls_context_for(worker);
  auto session = context != nullptr ? tls::TlsSession::accept(*context)
                                    : Result<tls::TlsSession>(Unexpected{std::errc::not_connected});
  if (!session) {  // no context loaded, or no memory for the session: the fd closes
    LOG_WARN("tls {}: no session: {}", peer.to_string(), session.error().message());
    live_.fetch_sub(1, std::memory_order_relaxed);
    co_return;
  }
  detail::TlsConnection connection(*worker.loop, std::move(fd), peer, options_.read_timeout_ms,
                                   output_limits_, std::move(*session));
  ConnectionNode node{&connection};
  enlist(worker, node);
  auto shaken = co_await connection.handshake(context->handshake_timeout_ms());
  count_handshake(worker, connection, shaken ? std::error_code() : shaken.error());
  if (shaken) {
    try {
      co_await handler_(connection);
    } catch (const std::exception& e) {
      log_handler_failure(connection, e.what());
    }
  } else {
    LOG_DEBUG("tls {}: handshake failed: {}", peer.to_string(), shaken.error().message());
    // An HTTP client on the TLS port is told so in its own language, as nginx does.
    if (shaken.error() == tls::Errc::kNotTls && !options_.tls_plaintext_reply.empty() &&
        connection.drop_tls()) {
      (void)co_await connection.write(std::as_bytes(std::span(options_.tls_plaintext_reply)));
    }
  }
  co_await connection.close();
  delist(worker, node);
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

// Stops one acceptor on its own loop's thread: no new connection reaches it from here on,
// and new connection attempts on its socket are refused (or, per worker, go to the sockets
// still open, which close next).
Task<> TcpServer::close_acceptor(Acceptor& acceptor) {
  if (acceptor.stopping) co_return;  // a drain closed it already
  acceptor.stopping = true;
  if (acceptor.waiting) (void)co_await io::cancel_fd(*acceptor.loop, acceptor.listen_fd.get());
  detail::LoopAccess::detach(*acceptor.loop, acceptor.listen_fd.get());
  acceptor.listen_fd.reset();
  listeners_open_.fetch_sub(1);
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
