// TcpServer with ServerOptions::tls: serve_tls(), the coroutine a TLS connection lives in on
// its worker (the handshake, then the handler), and the workers' TLS contexts and counters.

#include <atomic>
#include <exception>
#include <span>
#include <string_view>
#include <utility>

#include "ucp/log/Logger.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpServer.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsSession.h"

#include "TcpServerState.h"
#include "TlsConnection.h"

namespace ucp {

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

// The server session of a new connection; empty (said in the log) when there is none: no
// context loaded, or no memory for it.
tls::TlsSession accept_session(const tls::TlsContext* context, const InetAddress& peer) {
  auto session = context != nullptr ? tls::TlsSession::accept(*context)
                                    : Result<tls::TlsSession>(Unexpected{std::errc::not_connected});
  if (session) return std::move(*session);
  LOG_WARN("tls {}: no session: {}", peer.to_string(), session.error().message());
  return {};
}

// Its own frame, made only on this rare path: the write's awaiter would otherwise sit in every
// connection's frame.
Task<> reply_in_plaintext(TcpConnection& connection, std::string_view reply) {
  (void)co_await connection.write(std::as_bytes(std::span(reply)));
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
  // The session goes straight into the connection, with no local of its own: a coroutine
  // keeps every local in its frame for the connection's whole life, and this frame is the
  // largest block an idle connection holds (docs/tls.md, "Memory").
  detail::TlsConnection connection(*worker.loop, std::move(fd), peer, options_.read_timeout_ms,
                                   output_limits_, accept_session(context, peer));
  if (connection.session().native_handle() == nullptr) {  // the fd closes with the connection
    live_.fetch_sub(1, std::memory_order_relaxed);
    co_return;
  }
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
      co_await reply_in_plaintext(connection, options_.tls_plaintext_reply);
    }
  }
  co_await connection.close();
  delist(worker, node);
}

}  // namespace ucp
