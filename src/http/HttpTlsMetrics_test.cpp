// An HttpServer with TLS and serve_metrics(), over loopback on the backend under test: the
// handshake counters on /metrics (ok, failed by reason, resumed) with exact values after
// fresh, resumed and plain-text connections, promtool's verdict, and no ucp_tls_* series
// on a server without TLS.

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "ucp/http/HttpServer.h"
#include "ucp/tls/TlsContextHolder.h"

#include "Backends.h"
#include "ErrorText.h"
#include "HttpTestServer.h"
#include "LoopbackClient.h"
#include "Promtool.h"
#include "TestCertificates.h"
#include "TlsTestClient.h"

namespace ucp::http {
namespace {

using namespace std::chrono_literals;

/// The value of the sample `series` (its name and labels exactly as rendered), or -1.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

// An HttpServer with TLS (the test PKI's localhost certificate), one worker, GET /hello and
// /metrics, on a thread of its own.
class TlsHttpServer {
 public:
  TlsHttpServer() {
    const auto& pki = test::TestPki::get();
    tls::TlsOptions tls_options;
    tls_options.certificates = {{pki.ecdsa.certificate, pki.ecdsa.private_key}};
    auto holder = std::make_shared<tls::TlsContextHolder>();
    auto loaded = holder->load(tls_options);
    EXPECT_TRUE(loaded) << loaded.error().message;
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 2000;
    options.tls = holder;
    LoopOptions loop;
    loop.backend = test::backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    server_ = std::make_unique<HttpServer>(options, loop, HttpOptions{});
    server_->router().get("/hello",
                          [](Request&, Response& res) -> Task<> { co_return res.text("hi"); });
    server_->serve_metrics();
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  TlsHttpServer(const TlsHttpServer&) = delete;
  TlsHttpServer& operator=(const TlsHttpServer&) = delete;
  ~TlsHttpServer() {
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }
  HttpServer& server() { return *server_; }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

/// GET `target` with Connection: close: the whole answer.
std::string tls_get(test::TlsTestClient& client, const std::string& target) {
  EXPECT_TRUE(client) << client.error();
  if (!client) return {};
  EXPECT_TRUE(client.write("GET " + target + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  return client.read_to_end().data;
}

/// GET /hello on a kept-alive connection, read up to its body "hi", then close_notify: a
/// clean end keeps the session resumable (an EOF without close_notify would not).
bool hello(test::TlsTestClient& client) {
  EXPECT_TRUE(client) << client.error();
  if (!client || !client.write("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")) return false;
  std::string got;
  while (got.find("\r\n\r\nhi") == std::string::npos) {
    test::TlsRead part = client.read_some();
    got += part.data;
    if (part.closed || !part.error.empty()) return false;
  }
  client.close_notify();
  return true;
}

TEST(HttpTlsMetrics, HandshakesByResultAndResumptions) {
  TlsHttpServer s;
  test::TlsClientSettings settings;
  settings.ca_file = test::TestPki::get().ca_file;
  // Two fresh handshakes and one that resumes the first one's session (TLS 1.3: its ticket
  // came after the handshake, read with the answer).
  SSL_SESSION* first_session = nullptr;
  {
    auto first = test::TlsTestClient::connect(s.port(), settings);
    EXPECT_TRUE(hello(first));
    first_session = first.session();
  }
  ASSERT_NE(first_session, nullptr);
  {
    auto fresh = test::TlsTestClient::connect(s.port(), settings);
    EXPECT_TRUE(hello(fresh));
  }
  {
    test::TlsClientSettings resuming = settings;
    resuming.resume = first_session;
    auto resumed = test::TlsTestClient::connect(s.port(), resuming);
    EXPECT_TRUE(hello(resumed));
    EXPECT_EQ(SSL_session_reused(resumed.ssl()), 1);
  }
  SSL_SESSION_free(first_session);
  // One failed: plain HTTP to the TLS port, held open until the worker has counted it.
  auto failed = [&] { return s.server().tcp().tls_counters().at(0).handshakes_failed_total(); };
  {
    auto plain = test::connect_loopback(s.port());
    ASSERT_TRUE(plain);
    EXPECT_TRUE(test::send_text(plain->get(), "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (failed() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
  }
  ASSERT_EQ(failed(), 1u);

  auto scraper = test::TlsTestClient::connect(s.port(), settings);
  const std::string text = tls_get(scraper, "/metrics");
  ASSERT_NE(text.find("HTTP/1.1 200"), std::string::npos) << text;
  // The scrape's own handshake is the fourth.
  EXPECT_EQ(sample(text, "ucp_tls_handshakes_total{worker=\"0\",result=\"ok\"}"), 4) << text;
  EXPECT_EQ(sample(text, "ucp_tls_handshakes_total{worker=\"0\",result=\"failed\"}"), 1);
  EXPECT_EQ(sample(text, "ucp_tls_resumed_total{worker=\"0\"}"), 1);
  EXPECT_EQ(sample(text, "ucp_tls_handshake_failures_total{worker=\"0\",reason=\"not_tls\"}"), 1);
  EXPECT_EQ(text.find("reason=\"timeout\""), std::string::npos);  // reasons seen only

  if (!test::promtool_installed()) GTEST_SKIP() << test::kPromtoolMissing;
  const std::string body = text.substr(text.find("\r\n\r\n") + 4);
  const auto [code, said] = test::promtool(body);
  EXPECT_EQ(code, 0) << said << "\n--- exposition ---\n" << body;
  EXPECT_EQ(said, "") << body;
}

TEST(HttpTlsMetrics, NoneWithoutTls) {
  test::HttpTestServer s([](HttpServer& server) { server.serve_metrics(); });
  const auto reply = test::ask_once(s.port(), "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(reply.status, 200);
  EXPECT_NE(reply.body.find("\nucp_connections_open{"), std::string::npos);
  EXPECT_EQ(reply.body.find("ucp_tls_"), std::string::npos) << reply.body;
}

}  // namespace
}  // namespace ucp::http
