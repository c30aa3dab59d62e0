// beast_wss_echo: the Boost.Beast WebSocket echo server over TLS (wss://), beast_ws_echo.cpp
// with the stream Beast's own SSL examples use, websocket::stream<beast::ssl_stream<tcp::socket>>
// (Asio's ssl::stream behind Beast's flat_stream, which coalesces a write's buffers into one
// record): every message goes back as it came (text or binary).
//
//   beast_wss_echo -p PORT -c CERT_FILE -k KEY_FILE [-t THREADS]
//
// The TLS context is configured as UCP's defaults are for the benchmark of scripts/bench-tls.sh:
// TLS 1.3 only, groups X25519 then P-256, the TLS 1.3 suites in UCP's order, session tickets
// and OpenSSL's server session cache on (its defaults). Per session: the TLS handshake, then
// websocket::stream::async_accept, then async_read into a flat_buffer and async_write of it
// with the same kind. No permessage-deflate, Beast's default limits, errors through
// redirect_error. One io_context per thread (concurrency hint 1), the acceptor on the first;
// Asio's own reactor (epoll) drives it. SIGINT/SIGTERM stop it.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
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
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <openssl/ssl.h>
#include <sys/resource.h>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

awaitable<void> session(tcp::socket socket, ssl::context& context) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  websocket::stream<beast::ssl_stream<tcp::socket>> ws(std::move(socket), context);
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  co_await ws.next_layer().async_handshake(ssl::stream_base::server,
                                           asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
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
                       std::vector<std::unique_ptr<asio::io_context>>& contexts,
                       ssl::context& tls) {
  size_t next = 0;
  for (;;) {
    asio::io_context& target = *contexts[next++ % contexts.size()];
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(target, asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    asio::co_spawn(target, session(std::move(socket), tls), asio::detached);
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: beast_wss_echo -p PORT -c CERT_FILE -k KEY_FILE [-t THREADS]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0;
  long threads = 1;
  std::string certificate;
  std::string key;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "-p") {
      port = std::strtol(argv[i + 1], nullptr, 10);
    } else if (flag == "-t") {
      threads = std::strtol(argv[i + 1], nullptr, 10);
    } else if (flag == "-c") {
      certificate = argv[i + 1];
    } else if (flag == "-k") {
      key = argv[i + 1];
    } else {
      usage();
    }
  }
  if (argc % 2 == 0 || port <= 0 || port > 65535 || threads < 1 || threads > 256 ||
      certificate.empty() || key.empty()) {
    usage();
  }

  rlimit limit{};  // as many connections as the hard limit allows
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  boost::system::error_code ec;
  ssl::context tls(ssl::context::tls_server);
  tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                  ec);
  if (!ec) tls.use_certificate_chain_file(certificate, ec);
  if (!ec) tls.use_private_key_file(key, ssl::context::pem, ec);
  SSL_CTX* native = tls.native_handle();
  const char* suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
  if (ec || SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set1_groups_list(native, "X25519:P-256") != 1 ||
      SSL_CTX_set_ciphersuites(native, suites) != 1) {
    std::fprintf(stderr, "beast_wss_echo: TLS set-up failed: %s\n",
                 ec ? ec.message().c_str() : "OpenSSL refused an option");
    return 1;
  }
  SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);

  std::vector<std::unique_ptr<asio::io_context>> contexts;
  for (long t = 0; t < threads; ++t) contexts.push_back(std::make_unique<asio::io_context>(1));
  asio::io_context& main_context = *contexts.front();

  tcp::acceptor acceptor(main_context);
  const tcp::endpoint endpoint(tcp::v4(), static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "beast_wss_echo: cannot listen on port %ld: %s\n", port,
                 ec.message().c_str());
    return 1;
  }

  asio::signal_set signals(main_context, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    for (auto& context : contexts) context->stop();
  });
  asio::co_spawn(main_context, listen(acceptor, contexts, tls), asio::detached);

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
