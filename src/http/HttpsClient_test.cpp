// http::Client over https:// against an in-process HTTPS HttpServer (the test PKI), over
// loopback, on the backend under test: SNI, ALPN and verification against the URL's host,
// keep-alive reuse of a TLS connection, a refused certificate as an error value that pools
// nothing, a client certificate, and http:// and https:// origins side by side in one client.

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ucp/http/Client.h"
#include "ucp/http/HttpServer.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsError.h"
#include "ucp/tls/TlsSession.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopRunner.h"
#include "TestCertificates.h"

namespace ucp::http {
namespace {

using namespace std::chrono_literals;

const test::TestPki& pki() { return test::TestPki::get(); }

// An HttpServer on 127.0.0.1 with one worker: HTTPS with `certificate` (plain HTTP without).
// GET /whoami answers what the TLS session saw: "sni=<name> alpn=<protocol> client=<subject>".
class Upstream {
 public:
  explicit Upstream(std::optional<test::IssuedCertificate> certificate,
                    tls::VerifyClient verify_client = tls::VerifyClient::kNone) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.shutdown_timeout_ms = 2000;
    if (certificate) {
      tls::TlsOptions tls_options;
      tls_options.certificates = {{certificate->certificate, certificate->private_key}};
      tls_options.client_ca = pki().ca_file;
      tls_options.verify_client = verify_client;
      auto holder = std::make_shared<tls::TlsContextHolder>();
      auto loaded = holder->load(tls_options);
      EXPECT_TRUE(loaded) << loaded.error().message;
      options.tls = holder;
    }
    LoopOptions loop;
    loop.backend = test::backend_under_test();
    loop.ring_entries = 256;
    loop.provided_buffers_count = 64;
    server_ = std::make_unique<HttpServer>(options, loop, HttpOptions{});
    server_->router().get("/whoami", [](Request& req, Response& res) -> Task<> {
      std::string text = "plain";
      if (const tls::TlsSession* session = req.tls()) {
        auto client = session->peer_certificate();
        text = "sni=" + std::string(session->server_name()) +
               " alpn=" + std::string(session->alpn()) +
               " client=" + (client ? client->subject : "none");
      }
      res.text(text);
      co_return;
    });
    server_->router().get("/resumed", [](Request& req, Response& res) -> Task<> {
      res.text(req.tls() && req.tls()->resumed() ? "resumed" : "full handshake");
      co_return;
    });
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~Upstream() {
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }
  uint64_t accepted() const {
    uint64_t n = 0;
    for (const auto& s : server_->stats()) n += s.connections_accepted;
    return n;
  }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

std::string url(std::string_view scheme_and_host, uint16_t port, std::string_view path) {
  return std::string(scheme_and_host) + ":" + std::to_string(port) + std::string(path);
}

std::shared_ptr<const tls::TlsContext> trusting_test_ca(tls::CertificateFiles certificate = {}) {
  tls::TlsClientOptions options;
  options.ca_file = pki().ca_file;
  options.certificate = std::move(certificate);
  auto context = Client::tls_context(options);
  EXPECT_TRUE(context) << context.error().message;
  return context ? *context : nullptr;
}

ClientOptions with_tls(std::shared_ptr<const tls::TlsContext> context) {
  ClientOptions options;
  options.tls = std::move(context);
  return options;
}

// The body of GET `target`, or "error: <message>".
Task<std::string> fetch(Client& client, std::string target) {
  auto response = co_await client.get(std::move(target));
  if (!response) co_return "error: " + response.error().message();
  EXPECT_EQ(response->status(), 200);
  auto body = co_await response->read_all();
  co_return body ? *body : "error: " + body.error().message();
}

class HttpsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(test::backend_under_test());
    loop_ = test::make_loop(64);
    ASSERT_TRUE(loop_);
  }
  void run(Task<> body) { test::run_to_end(*loop_, std::move(body), 20s); }
  std::unique_ptr<EventLoop> loop_;
};

TEST_F(HttpsClientTest, FetchesOverTlsAndReusesTheConnection) {
  Upstream server(pki().ecdsa);
  run([](EventLoop& loop, Upstream& upstream) -> Task<> {
    Client client(loop, with_tls(trusting_test_ca()));
    const std::string target = url("https://localhost", upstream.port(), "/whoami");
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(co_await fetch(client, target), "sni=localhost alpn=http/1.1 client=none");
    }
    EXPECT_EQ(client.connections_made(), 1u);
    EXPECT_EQ(client.pool().reused(), 1u);
    EXPECT_EQ(client.pool().idle("https://localhost:" + std::to_string(upstream.port())), 1u);
    // A new connection to the same host resumes the context's session.
    client.pool().clear();
    EXPECT_EQ(co_await fetch(client, url("https://localhost", upstream.port(), "/resumed")),
              "resumed");
    EXPECT_EQ(client.connections_made(), 2u);
    // An IP literal: no SNI, and the certificate's IP address is what is verified.
    EXPECT_EQ(co_await fetch(client, url("https://127.0.0.1", upstream.port(), "/whoami")),
              "sni= alpn=http/1.1 client=none");
    EXPECT_EQ(client.connections_made(), 3u);
  }(*loop_, server));
  EXPECT_EQ(server.accepted(), 3u);
}

TEST_F(HttpsClientTest, AnUntrustedCertificateIsAVerificationErrorAndPoolsNothing) {
  Upstream server(pki().ecdsa);
  Upstream rsa_server(pki().rsa);  // localhost and rsa.test, no IP address
  run([](EventLoop& loop, Upstream& upstream, Upstream& rsa_upstream) -> Task<> {
    // No CA given: the system's CAs, which do not know the test CA.
    Client system_cas(loop);
    auto refused = co_await system_cas.get(url("https://localhost", upstream.port(), "/whoami"));
    EXPECT_FALSE(refused);
    if (!refused) co_return;
    EXPECT_EQ(refused.error(), tls::Errc::kCertificateVerifyFailed) << refused.error().message();
    EXPECT_EQ(system_cas.pool().idle(), 0u);
    EXPECT_EQ(system_cas.connections_made(), 0u);

    // A trusted chain for another name: the URL's host is verified.
    Client test_ca(loop, with_tls(trusting_test_ca()));
    auto mismatch = co_await test_ca.get(url("https://127.0.0.1", rsa_upstream.port(), "/"));
    EXPECT_FALSE(mismatch);
    if (!mismatch) co_return;
    EXPECT_EQ(mismatch.error(), tls::Errc::kCertificateVerifyFailed) << mismatch.error().message();
    EXPECT_EQ(test_ca.pool().idle(), 0u);
    // The same client, the same server, by a name the certificate holds.
    EXPECT_EQ(co_await fetch(test_ca, url("https://localhost", rsa_upstream.port(), "/whoami")),
              "sni=localhost alpn=http/1.1 client=none");

    // Verification off, only when asked.
    tls::TlsClientOptions no_verification;
    no_verification.verify_peer = false;
    auto unverified = Client::tls_context(no_verification);
    EXPECT_TRUE(unverified);
    if (!unverified) co_return;
    Client insecure(loop, with_tls(*unverified));
    EXPECT_EQ(co_await fetch(insecure, url("https://localhost", upstream.port(), "/whoami")),
              "sni=localhost alpn=http/1.1 client=none");
  }(*loop_, server, rsa_server));
}

TEST_F(HttpsClientTest, SendsAClientCertificateWhenTheServerRequiresOne) {
  Upstream server(pki().ecdsa, tls::VerifyClient::kRequire);
  run([](EventLoop& loop, Upstream& upstream) -> Task<> {
    const std::string target = url("https://localhost", upstream.port(), "/whoami");
    Client with_certificate(
        loop, with_tls(trusting_test_ca({pki().client.certificate, pki().client.private_key})));
    EXPECT_EQ(co_await fetch(with_certificate, target),
              "sni=localhost alpn=http/1.1 client=CN=client.test,O=UCP tests");
    Client without(loop, with_tls(trusting_test_ca()));
    EXPECT_TRUE((co_await fetch(without, target)).starts_with("error: "));
    EXPECT_EQ(without.pool().idle(), 0u);
  }(*loop_, server));
}

TEST_F(HttpsClientTest, HttpAndHttpsOriginsShareOneClientButNoConnection) {
  Upstream plain(std::nullopt);
  Upstream secure(pki().ecdsa);
  run([](EventLoop& loop, Upstream& plain_upstream, Upstream& secure_upstream) -> Task<> {
    Client client(loop, with_tls(trusting_test_ca()));
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(co_await fetch(client, url("http://localhost", plain_upstream.port(), "/whoami")),
                "plain");
      EXPECT_EQ(co_await fetch(client, url("https://localhost", secure_upstream.port(), "/whoami")),
                "sni=localhost alpn=http/1.1 client=none");
    }
    EXPECT_EQ(client.connections_made(), 2u);
    EXPECT_EQ(client.pool().reused(), 2u);
    EXPECT_EQ(client.pool().idle(), 2u);
  }(*loop_, plain, secure));
  EXPECT_EQ(plain.accepted(), 1u);
  EXPECT_EQ(secure.accepted(), 1u);
}

TEST(HttpsUrl, TakesHttpsUrlsApartWithTheirOwnOrigin) {
  auto url = ParsedUrl::parse("HTTPS://Example.com/a");
  ASSERT_TRUE(url);
  EXPECT_TRUE(url->https);
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->authority(), "example.com");
  EXPECT_EQ(url->origin(), "https://example.com:443");
  auto on_80 = ParsedUrl::parse("https://example.com:80/");
  auto plain = ParsedUrl::parse("http://example.com:80/");
  ASSERT_TRUE(on_80 && plain);
  EXPECT_EQ(on_80->authority(), "example.com:80");
  EXPECT_NE(on_80->origin(), plain->origin());  // never one pool key for both schemes
  EXPECT_EQ(ParsedUrl::parse("ftp://h/").error(), ClientErrc::kUnsupportedScheme);
}

}  // namespace
}  // namespace ucp::http
