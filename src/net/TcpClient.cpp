#include "ucp/net/TcpClient.h"

#include <chrono>
#include <optional>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/Resolver.h"
#include "ucp/net/Socket.h"

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

// One attempt: a socket, the connect bounded by `deadline` and the stop token, the connection.
Task<Result<ClientConnection>> attempt(EventLoop& loop, InetAddress address,
                                       Clock::time_point deadline, ClientOptions options) {
  if (options.stop.stop_requested()) co_return Unexpected{std::errc::operation_canceled};
  if (Clock::now() >= deadline) co_return Unexpected{std::errc::timed_out};
  auto fd = open_tcp_socket(address.family());
  if (!fd) co_return Unexpected{fd.error()};
  if (options.tcp_nodelay) set_tcp_nodelay(fd->get(), true);
  auto connected = co_await with_stop(
      with_deadline(io::connect(loop, fd->get(), address.get(), address.length()), deadline),
      options.stop);
  if (!connected) co_return Unexpected{connected.error()};  // ~UniqueFd closes the socket
  auto connection = make_pooled<TcpConnection>(loop, std::move(*fd), address,
                                               options.read_timeout_ms, options.output);
  co_return ClientConnection(connection.release());
}

Task<Result<ClientConnection>> resolve_and_connect(EventLoop& loop, std::string host, uint16_t port,
                                                   Clock::time_point deadline,
                                                   ClientOptions options) {
  Resolver& resolver = options.resolver != nullptr ? *options.resolver : Resolver::shared();
  auto addresses = co_await with_stop(
      with_deadline(resolver.resolve(loop, std::move(host), port, options.family), deadline),
      options.stop);
  if (!addresses) co_return Unexpected{addresses.error()};
  std::error_code last = make_error_code(ResolveErrc::kNoAddress);
  for (const InetAddress& address : *addresses) {
    auto connection = co_await attempt(loop, address, deadline, options);
    if (connection) co_return std::move(connection);
    last = connection.error();
    // Out of time or told to stop: the next address would not get a chance either.
    if (last == std::errc::timed_out || last == std::errc::operation_canceled) break;
  }
  co_return Unexpected{last};
}

// Closes a dropped connection, then frees it. If the loop shuts down first, it destroys this
// frame after reaping the connection's I/O, and `owned` frees the connection then.
Task<> close_and_free(TcpConnection* connection) {
  PoolPtr<TcpConnection> owned(connection);
  co_await owned->close();
}

}  // namespace

void ConnectionCloser::operator()(TcpConnection* connection) const noexcept {
  if (connection->close_finished()) {
    PoolDeleter{}(connection);
    return;
  }
  connection->loop().spawn(close_and_free(connection));
}

Task<Result<ClientConnection>> TcpClient::connect(EventLoop& loop, std::string host, uint16_t port,
                                                  ClientOptions options) {
  const Clock::time_point deadline = deadline_after(options.connect_timeout_ms);
  if (auto numeric = parse_numeric(host, port)) {
    return attempt(loop, *numeric, deadline, std::move(options));
  }
  return resolve_and_connect(loop, std::move(host), port, deadline, std::move(options));
}

Task<Result<ClientConnection>> TcpClient::connect(EventLoop& loop, const InetAddress& address,
                                                  ClientOptions options) {
  return attempt(loop, address, deadline_after(options.connect_timeout_ms), std::move(options));
}

}  // namespace ucp
