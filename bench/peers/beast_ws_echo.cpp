// beast_ws_echo: the Boost.Beast WebSocket echo server with C++20 coroutines, as Beast's own
// coroutine examples write it: every message goes back as it came (text or binary).
//
//   beast_ws_echo -p PORT [-t THREADS]
//
// One io_context per thread (concurrency hint 1), the acceptor on the first; accepted sockets go
// round-robin to the contexts and each gets a session coroutine (co_spawn + use_awaitable):
// websocket::stream::async_accept, then async_read into a flat_buffer and async_write of it
// with the same kind. No permessage-deflate (the benchmark compares framing and I/O), Beast's
// default limits. Errors come back through redirect_error, not exceptions. Asio's own reactor
// (epoll on Linux) drives it. SIGINT/SIGTERM stop it.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <sys/resource.h>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

awaitable<void> session(tcp::socket socket) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  websocket::stream<tcp::socket> ws(std::move(socket));
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  co_await ws.async_accept(asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
  beast::flat_buffer buffer;
  for (;;) {
    co_await ws.async_read(buffer, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // closed (Beast answers the close frame) or an error
    ws.binary(ws.got_binary());
    co_await ws.async_write(buffer.data(), asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    buffer.consume(buffer.size());
  }
}

awaitable<void> listen(tcp::acceptor& acceptor,
                       std::vector<std::unique_ptr<asio::io_context>>& contexts) {
  size_t next = 0;
  for (;;) {
    asio::io_context& target = *contexts[next++ % contexts.size()];
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(target, asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    asio::co_spawn(target, session(std::move(socket)), asio::detached);
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: beast_ws_echo -p PORT [-t THREADS]\n");
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

  std::vector<std::unique_ptr<asio::io_context>> contexts;
  for (long t = 0; t < threads; ++t) contexts.push_back(std::make_unique<asio::io_context>(1));
  asio::io_context& main_context = *contexts.front();

  boost::system::error_code ec;
  tcp::acceptor acceptor(main_context);
  const tcp::endpoint endpoint(tcp::v4(), static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "beast_ws_echo: cannot listen on port %ld: %s\n", port,
                 ec.message().c_str());
    return 1;
  }

  asio::signal_set signals(main_context, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    for (auto& context : contexts) context->stop();
  });
  asio::co_spawn(main_context, listen(acceptor, contexts), asio::detached);

  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> workers;
  for (size_t t = 1; t < contexts.size(); ++t) {
    guards.push_back(asio::make_work_guard(*contexts[t]));
    workers.emplace_back([&context = *contexts[t]] { context.run(); });
  }
  main_context.run();
  for (auto& worker : workers) worker.join();
  return 0;
}
