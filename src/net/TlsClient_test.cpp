// TcpClient with TLS (ClientOptions::tls) against a TLS TcpServer of this process, over
// loopback, on the backend under test (ctest runs it on both): the handshake before connect()
// returns, verification of the server's certificate against the host name with the reason
// of a refusal, ALPN, resumption across reconnects from the context's session cache,
// close_notify both ways, truncation, and a server that never answers the ClientHello.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include "ucp/net/Socket.h"
#include "ucp/net/TcpClient.h"
#include "ucp/net/TcpServer.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsError.h"
#include "ucp/tls/TlsSession.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopRunner.h"
#include "TestCertificates.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

const test::TestPki& pki() { return test::TestPki::get(); }

// Echo; a message "bye" is answered and then the server closes (close_notify).
Task<> echo_until_bye(TcpConnection& connection) {
  for (;;) {
    auto data = co_await connection.receive();
    if (!data || data->empty()) co_return;
    if (!co_await connection.write_all(data->bytes())) co_return;
    if (std::string_view(data->chars(), data->size()) == "bye") co_return;
  }
}

// A TLS echo server on its own thread.
class TlsEchoServer {
 public:
  explicit TlsEchoServer(const test::IssuedCertificate& certificate = test::TestPki::get().ecdsa,
                         std::vector<std::string> alpn = {"http/1.1"}) {
    tls::TlsOptions tls_options;
    tls_options.certificates = {{certificate.certificate, certificate.private_key}};
    tls_options.alpn = std::move(alpn);
    auto holder = std::make_shared<tls::TlsContextHolder>();
    auto loaded = holder->load(tls_options);
    EXPECT_TRUE(loaded) << loaded.error().message;
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 3000;
    options.tls = holder;
    LoopOptions loop;
    loop.backend = test::backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    server_ = std::make_unique<TcpServer>(options, loop, &echo_until_bye);
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TlsEchoServer() {
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }

 private:
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
};

std::shared_ptr<const tls::TlsContext> client_context(std::vector<std::string> alpn = {},
                                                      std::string ca_file = pki().ca_file) {
  tls::TlsClientOptions options;
  options.ca_file = std::move(ca_file);
  options.alpn = std::move(alpn);
  auto context = tls::TlsContext::client(options);
  EXPECT_TRUE(context) << context.error().message;
  return context ? *context : nullptr;
}

struct Outcome {
  std::error_code error;  // connect's
  std::string echoed;
  std::string alpn;
  std::string version;
  bool resumed = false;
  std::error_code read_end;  // how the last read ended (after "bye": close_notify = none)
  bool end_of_stream = false;
};

Task<> talk(EventLoop& loop, std::string host, uint16_t port, ClientOptions options, Outcome& out,
            std::string message = "hello") {
  auto connection = co_await TcpClient::connect(loop, std::move(host), port, options);
  if (!connection) {
    out.error = connection.error();
    co_return;
  }
  const tls::TlsSession* session = (*connection)->tls();
  if (session == nullptr) co_return;
  out.alpn = session->alpn();
  out.version = session->version();
  out.resumed = session->resumed();
  if (!co_await (*connection)->write_all(std::span<const char>(message))) co_return;
  char buffer[256];
  while (out.echoed.size() < message.size()) {
    auto n = co_await (*connection)->read(buffer);
    if (!n || *n == 0) co_return;
    out.echoed.append(buffer, *n);
  }
  if (message == "bye") {  // the server closes now: close_notify, then the end
    auto n = co_await (*connection)->read(buffer);
    if (n) {
      out.end_of_stream = *n == 0;
    } else {
      out.read_end = n.error();
    }
  }
  co_await (*connection)->close();
}

TEST(TlsClient, ConnectsVerifiesAndEchoes) {
  TlsEchoServer server;
  auto loop = test::make_loop(64);
  ClientOptions options;
  options.tls = client_context({"http/1.1"});
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "localhost", server.port(), options, out));
  ASSERT_FALSE(out.error) << out.error.message();
  EXPECT_EQ(out.echoed, "hello");
  EXPECT_EQ(out.alpn, "http/1.1");
  EXPECT_EQ(out.version, "TLSv1.3");
}

TEST(TlsClient, AnIpLiteralIsVerifiedAgainstTheCertificatesAddresses) {
  TlsEchoServer server;
  auto loop = test::make_loop();
  ClientOptions options;
  options.tls = client_context();
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "127.0.0.1", server.port(), options, out));
  ASSERT_FALSE(out.error) << out.error.message();
  EXPECT_EQ(out.echoed, "hello");
}

TEST(TlsClient, ReconnectsResumeTheSession) {
  TlsEchoServer server;
  auto loop = test::make_loop(64);
  ClientOptions options;
  options.tls = client_context();
  Outcome first, second;
  test::run_to_end(
      *loop, [](EventLoop& l, uint16_t port, ClientOptions o, Outcome& a, Outcome& b) -> Task<> {
        co_await talk(l, "localhost", port, o, a);
        co_await talk(l, "localhost", port, o, b);
      }(*loop, server.port(), options, first, second));
  ASSERT_FALSE(first.error) << first.error.message();
  ASSERT_FALSE(second.error) << second.error.message();
  EXPECT_FALSE(first.resumed);
  EXPECT_TRUE(second.resumed);
  EXPECT_EQ(second.echoed, "hello");
}

TEST(TlsClient, AWrongHostNameFailsVerificationWithTheReason) {
  TlsEchoServer server;
  auto loop = test::make_loop();
  ClientOptions options;
  options.tls = client_context();
  options.tls_server_name = "elsewhere.test";
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "127.0.0.1", server.port(), options, out));
  ASSERT_EQ(out.error, tls::Errc::kCertificateVerifyFailed) << out.error.message();
  EXPECT_EQ(tls::detail_of(out.error), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_NE(out.error.message().find("hostname mismatch"), std::string::npos)
      << out.error.message();
}

TEST(TlsClient, AnUnknownCaFailsVerification) {
  TlsEchoServer server(pki().untrusted);
  auto loop = test::make_loop();
  ClientOptions options;
  options.tls = client_context();
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "localhost", server.port(), options, out));
  ASSERT_EQ(out.error, tls::Errc::kCertificateVerifyFailed) << out.error.message();
  EXPECT_EQ(tls::detail_of(out.error), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

TEST(TlsClient, TheServersCloseNotifyReadsAsTheEnd) {
  TlsEchoServer server;
  auto loop = test::make_loop(64);
  ClientOptions options;
  options.tls = client_context();
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "localhost", server.port(), options, out, "bye"));
  ASSERT_FALSE(out.error) << out.error.message();
  EXPECT_EQ(out.echoed, "bye");
  EXPECT_TRUE(out.end_of_stream) << out.read_end.message();
}

// A listener that accepts (the kernel does) and never says a word: the handshake times out
// within the context's handshake_timeout_ms.
TEST(TlsClient, ASilentServerTimesTheHandshakeOut) {
  auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), ListenOptions{});
  ASSERT_TRUE(listener);
  const uint16_t port = InetAddress::local_of(listener->get())->port();
  tls::TlsClientOptions tls_options;
  tls_options.ca_file = pki().ca_file;
  tls_options.handshake_timeout_ms = 100;
  auto context = tls::TlsContext::client(tls_options);
  ASSERT_TRUE(context);
  auto loop = test::make_loop();
  ClientOptions options;
  options.tls = *context;
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "localhost", port, options, out));
  EXPECT_EQ(out.error, tls::Errc::kHandshakeTimeout) << out.error.message();
}

// A server that closes the TCP connection in the middle of the handshake: truncated.
TEST(TlsClient, AServerThatHangsUpMidHandshakeIsTruncated) {
  auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), ListenOptions{});
  ASSERT_TRUE(listener);
  const uint16_t port = InetAddress::local_of(listener->get())->port();
  std::thread rude([fd = listener->get()] {
    const int accepted = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (accepted < 0) return;
    char hello[64];
    (void)::recv(accepted, hello, sizeof hello, 0);  // some of the ClientHello
    ::close(accepted);
  });
  auto loop = test::make_loop();
  ClientOptions options;
  options.tls = client_context();
  Outcome out;
  test::run_to_end(*loop, talk(*loop, "localhost", port, options, out));
  rude.join();
  EXPECT_TRUE(out.error == tls::Errc::kTruncated || out.error == std::errc::connection_reset)
      << out.error.message();
}

}  // namespace
}  // namespace ucp
