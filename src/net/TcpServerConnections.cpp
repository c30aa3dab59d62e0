// An accepted connection's way to its worker loop: round-robin, through the worker's task
// queue (post) or the ring hand-off (IORING_OP_MSG_RING), and serve(), the coroutine the
// connection lives in on that worker (serve_tls() for a TLS server: TcpServerTls.cpp).

#include <exception>

#include <sys/socket.h>

#include "ucp/log/Logger.h"
#include "ucp/net/TcpServer.h"

#include "RingHandOff.h"
#include "TcpServerState.h"

namespace ucp {

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

void TcpServer::deliver_from_ring(size_t index, UniqueFd fd, bool closing) {
  Worker& worker = *workers_[index];
  if (closing) {  // on its way while this worker shut down: close it
    live_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  worker.loop->spawn(start_serving(worker, std::move(fd), InetAddress()));
}

void TcpServer::fall_back_from_ring(size_t index, UniqueFd fd) {
  post_to_worker(*workers_[index], std::move(fd), InetAddress());
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

}  // namespace ucp
