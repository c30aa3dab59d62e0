// TcpServer's acceptors: the listening sockets (bound here, one per worker in a SO_REUSEPORT
// group, or inherited), the accept loops, admission against max_connections, and closing them.

#include <cerrno>
#include <string>

#include <sys/socket.h>

#include "ucp/io/detail/LoopAccess.h"
#include "ucp/log/Logger.h"
#include "ucp/net/TcpServer.h"

#include "RingHandOff.h"
#include "TcpServerState.h"

namespace ucp {

namespace detail {

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

}  // namespace detail

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
    if (acceptors_ == Acceptors::kPerWorker) {
      acceptor_list_.push_back(std::make_unique<Acceptor>(
          *this, *workers_[i]->loop, workers_[i].get(), std::move(sockets[i])));
    } else {
      detail::LoopAccess::attach(*main_loop_, sockets[i].get());
      acceptor_list_.push_back(
          std::make_unique<Acceptor>(*this, *main_loop_, nullptr, std::move(sockets[i])));
    }
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
    if (!probe) return detail::describe_listen_error(address, error_from_errno(errno));
    if (::bind(probe.get(), address.get(), address.length()) != 0) {
      return detail::describe_listen_error(address, error_from_errno(errno));
    }
    bind_to = InetAddress::local_of(probe.get()).value_or(address);
  }
  ListenOptions listen = options_.listen;
  listen.reuse_port = true;
  for (auto& worker : workers_) {
    auto listening = listen_on(bind_to, listen);
    if (!listening) {
      acceptor_list_.clear();
      return detail::describe_listen_error(bind_to, listening.error());
    }
    if (acceptor_list_.empty()) {
      local_ = InetAddress::local_of(listening->get()).value_or(bind_to);
      bind_to = local_;
    }
    acceptor_list_.push_back(
        std::make_unique<Acceptor>(*this, *worker->loop, worker.get(), std::move(*listening)));
  }
  if (options_.msg_ring_handoff) {
    notes +=
        "msg_ring_handoff: unused with server.acceptors = per_worker (each worker accepts "
        "its own connections; nothing is handed off)\n";
  }
  return {};
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

void TcpServer::Acceptor::on_accept(int accepted_fd) noexcept {
  io::Accepted accepted;
  accepted.fd = UniqueFd(accepted_fd);
  server->on_accepted(*this, std::move(accepted));  // peer: asked lazily
}

Task<> TcpServer::accept_connections(Acceptor& acceptor) {
  if (acceptor.loop->capabilities().multishot_accept) {
    co_await multishot_accept_loop(acceptor);
  } else {
    co_await accept_loop(acceptor);
  }
}

Task<> TcpServer::multishot_accept_loop(Acceptor& acceptor) {
  while (!acceptor.stopping) {
    acceptor.waiting = true;
    auto ended = co_await acceptor;  // accepts until the kernel ends the multishot
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

}  // namespace ucp
