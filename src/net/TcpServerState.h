#pragma once
// TcpServer's per-worker and per-acceptor state, shared by the files the class is written in
// (private to src/net):
//   TcpServer.cpp            start, run, stop, drain and the shutdown, describe, statistics
//   TcpServerAccept.cpp      the listening sockets (bound, per worker, or inherited), the
//                            accept loops (multishot or one at a time), admission against
//                            max_connections, closing an acceptor
//   TcpServerConnections.cpp an accepted connection's way to its worker (post or MSG_RING)
//                            and serve(), the coroutine it lives in
//   TcpServerTls.cpp         serve_tls() (the handshake, then the handler) and the workers'
//                            TLS contexts and counters

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <utility>

#include "ucp/base/UniqueFd.h"
#include "ucp/io/detail/MultishotAccept.h"
#include "ucp/net/TcpServer.h"
#include "ucp/tls/TlsCounters.h"

namespace ucp {
namespace detail {

/// The one-line error of a socket that could not listen (the port in use says what to do).
Unexpected<Error> describe_listen_error(const InetAddress& address, std::error_code error);

}  // namespace detail

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
/// `loop`'s thread once the server runs. Its multishot accept (where the loop has one) calls
/// on_accept() for each new connection.
struct TcpServer::Acceptor : detail::MultishotAccept {
  Acceptor(TcpServer& owner, EventLoop& accepting_loop, Worker* serving,
           UniqueFd listening) noexcept
      : MultishotAccept(accepting_loop, listening.get(), hook<&Acceptor::on_accept>),
        server(&owner),
        loop(&accepting_loop),
        worker(serving),
        listen_fd(std::move(listening)) {}
  void on_accept(int accepted_fd) noexcept;  // TcpServerAccept.cpp

  TcpServer* server;
  EventLoop* loop;
  Worker* worker;
  UniqueFd listen_fd;
  bool stopping = false;
  bool waiting = false;  // an accept is in flight: cancel it to stop
  std::chrono::steady_clock::time_point last_fd_warning{};
  std::chrono::steady_clock::time_point last_limit_warning{};
};

}  // namespace ucp
