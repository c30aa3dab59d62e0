#include "ucp/net/TcpClient.h"

#include <chrono>
#include <optional>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/Resolver.h"
#include "ucp/net/Socket.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"

#include "TlsConnection.h"

namespace ucp {

namespace {

Clock::time_point deadline_after(uint32_t ms) {
  if (ms == 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(ms);
}

std::optional<InetAddress> parse_numeric(const std::string& host, uint16_t port) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {  // "[::1]", as in URLs
    return InetAddress::parse(host.substr(1, host.size() - 2), port);
  }
  return InetAddress::parse(host, port);
}

// The TLS handshake of a connection made: bounded by the context's handshake timeout and by
// what is left of the connect deadline.
Task<Result<ClientConnection>> secure(EventLoop& loop, UniqueFd fd, InetAddress address,
                                      Clock::time_point deadline, const ClientOptions& options,
                                      const std::string& server_name) {
  auto session = tls::TlsSession::connect(*options.tls, server_name, options.tls->session_cache());
  if (!session) co_return Unexpected{session.error()};
  auto connection = make_pooled<detail::TlsConnection>(
      loop, std::move(fd), address, options.read_timeout_ms, options.output, std::move(*session));
  ClientConnection owned(connection.release());  // closes it in the background on failure
  uint32_t timeout_ms = options.tls->handshake_timeout_ms();
  if (deadline != Clock::time_point::max()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const auto left_ms = static_cast<uint32_t>(std::max<int64_t>(1, left.count()));
    timeout_ms = timeout_ms == 0 ? left_ms : std::min(timeout_ms, left_ms);
  }
  auto shaken = co_await static_cast<detail::TlsConnection&>(*owned).handshake(timeout_ms);
  if (!shaken) co_return Unexpected{shaken.error()};
  co_return std::move(owned);
}

// One attempt: a socket, the connect bounded by `deadline` and the stop token, the connection.
Task<Result<ClientConnection>> attempt(EventLoop& loop, InetAddress address,
                                       Clock::time_point deadline, ClientOptions options,
                                       std::string server_name) {
  if (options.stop.stop_requested()) co_return Unexpected{std::errc::operation_canceled};
  if (Clock::now() >= deadline) co_return Unexpected{std::errc::timed_out};
  auto fd = open_tcp_socket(address.family());
  if (!fd) co_return Unexpected{fd.error()};
  if (options.tcp_nodelay) set_tcp_nodelay(fd->get(), true);
  auto connected = co_await with_stop(
      with_deadline(io::connect(loop, fd->get(), address.get(), address.length()), deadline),
      options.stop);
  if (!connected) co_return Unexpected{connected.error()};  // ~UniqueFd closes the socket
  if (options.tls) {
    co_return co_await secure(loop, std::move(*fd), address, deadline, options, server_name);
  }
  auto connection = make_pooled<TcpConnection>(loop, std::move(*fd), address,
                                               options.read_timeout_ms, options.output);
  co_return ClientConnection(connection.release());
}

Task<Result<ClientConnection>> resolve_and_connect(EventLoop& loop, std::string host, uint16_t port,
                                                   Clock::time_point deadline,
                                                   ClientOptions options, std::string server_name) {
  Resolver& resolver = options.resolver != nullptr ? *options.resolver : Resolver::shared();
  auto addresses = co_await with_stop(
      with_deadline(resolver.resolve(loop, host, port, options.family), deadline), options.stop);
  if (!addresses) co_return Unexpected{addresses.error()};
  std::error_code last = make_error_code(ResolveErrc::kNoAddress);
  if (server_name.empty()) server_name = host;
  for (const InetAddress& address : *addresses) {
    auto connection = co_await attempt(loop, address, deadline, options, server_name);
    if (connection) co_return std::move(connection);
    last = connection.error();
    // Out of time or told to stop: the next address would not get a chance either.
    if (last == std::errc::timed_out || last == std::errc::operation_canceled) break;
  }
  co_return Unexpected{last};
}

// Frees a connection as the type it was made as.
void free_connection(TcpConnection* connection) noexcept {
  if (connection->tls_object()) {
    PoolDeleter{}(static_cast<detail::TlsConnection*>(connection));
  } else {
    PoolDeleter{}(connection);
  }
}

// Closes a dropped connection, then frees it. If the loop shuts down first, it destroys this
// frame after reaping the connection's I/O, and `owned` frees the connection then.
struct FreeConnection {
  void operator()(TcpConnection* connection) const noexcept { free_connection(connection); }
};
Task<> close_and_free(TcpConnection* connection) {
  std::unique_ptr<TcpConnection, FreeConnection> owned(connection);
  co_await owned->close();
}

}  // namespace

void ConnectionCloser::operator()(TcpConnection* connection) const noexcept {
  if (connection->close_finished()) {
    free_connection(connection);
    return;
  }
  connection->loop().spawn(close_and_free(connection));
}

Task<Result<ClientConnection>> TcpClient::connect(EventLoop& loop, std::string host, uint16_t port,
                                                  ClientOptions options) {
  const Clock::time_point deadline = deadline_after(options.connect_timeout_ms);
  // The name to verify is copied here: the view may end with this call.
  std::string name(options.tls_server_name);
  if (auto numeric = parse_numeric(host, port)) {
    if (name.empty()) name = numeric->ip();
    return attempt(loop, *numeric, deadline, std::move(options), std::move(name));
  }
  return resolve_and_connect(loop, std::move(host), port, deadline, std::move(options),
                             std::move(name));
}

Task<Result<ClientConnection>> TcpClient::connect(EventLoop& loop, const InetAddress& address,
                                                  ClientOptions options) {
  std::string name(options.tls_server_name);
  if (options.tls && name.empty()) name = address.ip();
  return attempt(loop, address, deadline_after(options.connect_timeout_ms), std::move(options),
                 std::move(name));
}

}  // namespace ucp
