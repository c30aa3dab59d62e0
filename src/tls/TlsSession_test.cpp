#include "ucp/tls/TlsSession.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "ucp/tls/TicketKeyRing.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsCounters.h"
#include "ucp/tls/TlsSessionCache.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

using test::TlsLink;

const test::TestPki& pki() { return test::TestPki::get(); }

CertificateFiles files(const test::IssuedCertificate& issued) {
  return {issued.certificate, issued.private_key};
}

TlsOptions server_options(std::vector<CertificateFiles> certificates = {}) {
  TlsOptions options;
  options.certificates =
      certificates.empty() ? std::vector{files(pki().ecdsa)} : std::move(certificates);
  return options;
}

TlsClientOptions client_options() {
  TlsClientOptions options;
  options.ca_file = pki().ca_file;
  options.alpn = {"http/1.1"};
  return options;
}

std::shared_ptr<const TlsContext> make_server(const TlsOptions& options) {
  auto context = TlsContext::server(options);
  EXPECT_TRUE(context) << context.error().message;
  return context ? *context : nullptr;
}

std::shared_ptr<const TlsContext> make_client(const TlsClientOptions& options) {
  auto context = TlsContext::client(options);
  EXPECT_TRUE(context) << context.error().message;
  return context ? *context : nullptr;
}

TlsLink link(const TlsContext& client, const TlsContext& server,
             std::string_view name = "localhost", TlsSessionCache* cache = nullptr) {
  auto c = TlsSession::connect(client, name, cache);
  auto s = TlsSession::accept(server);
  EXPECT_TRUE(c && s);
  return TlsLink(std::move(*c), std::move(*s));
}

// A handshake, then reading what the server sent after it (TLS 1.3 tickets).
test::HandshakeOutcome connect_and_settle(TlsLink& link) {
  auto outcome = link.handshake();
  if (outcome.ok()) link.receive(link.client);
  return outcome;
}

std::string version_name(const ::testing::TestParamInfo<TlsVersion>& version) {
  return version.param == TlsVersion::k1_2 ? "Tls12" : "Tls13";
}

TEST(TlsSession, Tls13HandshakeWithAlpnMovesDataBothWays) {
  auto server = make_server(server_options());
  auto client = make_client(client_options());
  auto l = link(*client, *server);
  ASSERT_TRUE(l.handshake().ok());
  for (const auto* side : {&l.client, &l.server}) {
    EXPECT_EQ(side->version(), "TLSv1.3");
    EXPECT_EQ(side->protocol(), TlsVersion::k1_3);
    EXPECT_EQ(side->cipher(), "TLS_AES_128_GCM_SHA256");
    EXPECT_EQ(side->alpn(), "http/1.1");
    EXPECT_EQ(side->alpn_index(), 0);
    EXPECT_EQ(side->server_name(), "localhost");
    EXPECT_FALSE(side->resumed());
  }
  EXPECT_TRUE(l.server.is_server());
  EXPECT_FALSE(l.client.is_server());

  ASSERT_FALSE(l.send(l.client, "GET / HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(l.receive(l.server).text, "GET / HTTP/1.1\r\n\r\n");
  ASSERT_FALSE(l.send(l.server, "HTTP/1.1 200 OK\r\n\r\n"));
  EXPECT_EQ(l.receive(l.client).text, "HTTP/1.1 200 OK\r\n\r\n");

  auto peer = l.client.peer_certificate();
  ASSERT_TRUE(peer);
  EXPECT_NE(peer->subject.find("CN=localhost"), std::string::npos) << peer->subject;
  EXPECT_NE(peer->issuer.find("CN=UCP Test CA"), std::string::npos) << peer->issuer;
  EXPECT_EQ(peer->subject_alt_names, (std::vector<std::string>{"DNS:localhost", "DNS:example.test",
                                                               "DNS:*.wild.test", "IP:127.0.0.1"}));
  EXPECT_GT(peer->not_after, peer->not_before);
  EXPECT_GT(peer->not_after, static_cast<int64_t>(std::time(nullptr)));
  EXPECT_FALSE(l.server.peer_certificate()) << "no client certificate was asked for";
}

TEST(TlsSession, Tls12HandshakeWhenTheClientStopsAt12) {
  auto server = make_server(server_options());
  auto options = client_options();
  options.max_version = TlsVersion::k1_2;
  auto client = make_client(options);
  auto l = link(*client, *server);
  ASSERT_TRUE(l.handshake().ok());
  EXPECT_EQ(l.server.version(), "TLSv1.2");
  EXPECT_EQ(l.server.protocol(), TlsVersion::k1_2);
  EXPECT_EQ(l.server.cipher(), "ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_EQ(l.server.alpn(), "http/1.1");
  ASSERT_FALSE(l.send(l.client, "ping"));
  EXPECT_EQ(l.receive(l.server).text, "ping");
}

// The server's cipher order decides (AES-128-GCM before AES-256-GCM), except for a client that
// lists ChaCha20 first: it gets ChaCha20 (SSL_OP_PRIORITIZE_CHACHA).
TEST(TlsSession, TheServersCipherOrderDecidesButAChaChaFirstClientGetsChaCha) {
  auto server = make_server(server_options());
  const auto negotiated = [&](TlsVersion version, const char* ciphers, const char* suites) {
    auto options = client_options();
    options.max_version = version;
    options.ciphers = ciphers;
    options.ciphersuites = suites;
    auto client = make_client(options);
    auto l = link(*client, *server);
    EXPECT_TRUE(l.handshake().ok());
    return std::string(l.server.cipher());
  };
  EXPECT_EQ(
      negotiated(TlsVersion::k1_2, "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256",
                 kDefaultCiphersuites),
      "ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_EQ(
      negotiated(TlsVersion::k1_2, "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
                 kDefaultCiphersuites),
      "ECDHE-ECDSA-CHACHA20-POLY1305");
  EXPECT_EQ(negotiated(TlsVersion::k1_3, kDefaultCiphers,
                       "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"),
            "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(negotiated(TlsVersion::k1_3, kDefaultCiphers,
                       "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"),
            "TLS_CHACHA20_POLY1305_SHA256");
}

TEST(TlsSession, RsaCertificateServesBothVersions) {
  auto server = make_server(server_options({files(pki().rsa)}));
  for (auto version : {TlsVersion::k1_2, TlsVersion::k1_3}) {
    auto options = client_options();
    options.max_version = version;
    auto client = make_client(options);
    auto l = link(*client, *server, "rsa.test");
    ASSERT_TRUE(l.handshake().ok());
    EXPECT_EQ(l.client.protocol(), version);
    if (version == TlsVersion::k1_2) {
      EXPECT_EQ(l.client.cipher(), "ECDHE-RSA-AES128-GCM-SHA256");
    }
    ASSERT_FALSE(l.send(l.server, "pong"));
    EXPECT_EQ(l.receive(l.client).text, "pong");
  }
}

TEST(TlsSession, AServerAt13RefusesATls12Client) {
  auto options = server_options();
  options.min_version = TlsVersion::k1_3;
  auto server = make_server(options);
  auto client_settings = client_options();
  client_settings.max_version = TlsVersion::k1_2;
  auto client = make_client(client_settings);
  auto l = link(*client, *server);
  auto outcome = l.handshake();
  EXPECT_EQ(outcome.server, Errc::kHandshakeFailed);
  EXPECT_NE(outcome.server.message().find("unsupported protocol"), std::string::npos)
      << outcome.server.message();
  EXPECT_EQ(outcome.client, Errc::kHandshakeFailed) << outcome.client.message();
  EXPECT_TRUE(l.server.failed());
  // The failure sticks.
  auto again = l.server.handshake();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), outcome.server);
}

TEST(TlsSession, AlpnPicksTheServersPreferenceAndRefusesNoOverlap) {
  auto options = server_options();
  options.alpn = {"h2", "http/1.1"};
  auto server = make_server(options);

  auto both = client_options();
  both.alpn = {"http/1.1", "h2"};
  auto l = link(*make_client(both), *server);
  ASSERT_TRUE(l.handshake().ok());
  EXPECT_EQ(l.server.alpn(), "h2");
  EXPECT_EQ(l.server.alpn_index(), 0);

  auto none = client_options();
  none.alpn = {};
  auto plain = link(*make_client(none), *server);
  ASSERT_TRUE(plain.handshake().ok());
  EXPECT_EQ(plain.server.alpn(), "");
  EXPECT_EQ(plain.server.alpn_index(), -1);

  auto other = client_options();
  other.alpn = {"spdy/3"};
  auto refused = link(*make_client(other), *server);
  auto outcome = refused.handshake();
  EXPECT_EQ(outcome.server, Errc::kHandshakeFailed);
  EXPECT_EQ(outcome.client, Errc::kHandshakeFailed);
  EXPECT_NE(outcome.client.message().find("no application protocol"), std::string::npos)
      << outcome.client.message();
}

TEST(TlsSession, SniChoosesTheCertificateByItsSubjectAltNames) {
  const auto& p = pki();
  // An exact name listed after a wildcard that also matches it: the exact one wins.
  auto exact = p.ca->issue(p.directory + "/exact-wild",
                           test::certificate_request("exact.wild.test", {"exact.wild.test"}));
  auto server = make_server(server_options({files(p.rsa), files(p.ecdsa), files(exact)}));
  auto verified = make_client(client_options());
  auto unverified_options = client_options();
  unverified_options.verify_peer = false;
  auto unverified = make_client(unverified_options);

  auto subject_of = [&](const TlsContext& client, std::string_view name) {
    auto l = link(client, *server, name);
    auto outcome = l.handshake();
    EXPECT_TRUE(outcome.ok()) << name << ": " << outcome.client.message();
    EXPECT_EQ(l.server.server_name(), name);
    auto peer = l.client.peer_certificate();
    return peer ? peer->subject : std::string("none");
  };
  EXPECT_NE(subject_of(*verified, "rsa.test").find("CN=rsa.test"), std::string::npos);
  EXPECT_NE(subject_of(*verified, "example.test").find("CN=localhost"), std::string::npos);
  EXPECT_NE(subject_of(*verified, "a.wild.test").find("CN=localhost"), std::string::npos);
  EXPECT_NE(subject_of(*verified, "A.Wild.Test").find("CN=localhost"), std::string::npos);
  EXPECT_NE(subject_of(*verified, "exact.wild.test").find("CN=exact.wild.test"), std::string::npos);
  // "localhost" is on the first two: the first listed wins.
  EXPECT_NE(subject_of(*verified, "localhost").find("CN=rsa.test"), std::string::npos);
  // A wildcard covers one label only; unknown names get the default (the first).
  EXPECT_NE(subject_of(*unverified, "b.a.wild.test").find("CN=rsa.test"), std::string::npos);
  EXPECT_NE(subject_of(*unverified, "nothing.test").find("CN=rsa.test"), std::string::npos);
}

TEST(TlsSession, VerifyFailuresSayWhy) {
  const auto& p = pki();
  auto verify_error = [&](const TlsClientOptions& options, const test::IssuedCertificate& leaf,
                          std::string_view name) {
    auto l = link(*make_client(options), *make_server(server_options({files(leaf)})), name);
    auto outcome = l.handshake();
    EXPECT_EQ(outcome.client, Errc::kCertificateVerifyFailed) << outcome.client.message();
    // The client's alert ends the server's handshake too.
    EXPECT_EQ(outcome.server, Errc::kHandshakeFailed) << outcome.server.message();
    return outcome.client;
  };

  auto unknown = verify_error(client_options(), p.untrusted, "localhost");
  EXPECT_EQ(detail_of(unknown), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(unknown.message(),
            "TLS certificate verify failed: unable to get local issuer certificate");

  auto system_store = client_options();
  system_store.ca_file.clear();  // the system's CAs do not know the test CA
  EXPECT_EQ(detail_of(verify_error(system_store, p.ecdsa, "localhost")),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);

  auto wrong_name = verify_error(client_options(), p.ecdsa, "wrong.test");
  EXPECT_EQ(detail_of(wrong_name), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_NE(wrong_name.message().find("hostname mismatch"), std::string::npos);

  EXPECT_EQ(detail_of(verify_error(client_options(), p.ecdsa, "127.0.0.2")),
            X509_V_ERR_IP_ADDRESS_MISMATCH);
  auto expired = verify_error(client_options(), p.expired, "localhost");
  EXPECT_EQ(detail_of(expired), X509_V_ERR_CERT_HAS_EXPIRED);
  EXPECT_NE(expired.message().find("certificate has expired"), std::string::npos);

  // An IP literal is verified against the certificate's IP addresses (and sends no SNI).
  auto by_ip = link(*make_client(client_options()), *make_server(server_options()), "127.0.0.1");
  ASSERT_TRUE(by_ip.handshake().ok());
  EXPECT_EQ(by_ip.server.server_name(), "");
}

TEST(TlsSession, AClientThatVerifiesNeedsAServerName) {
  auto client = make_client(client_options());
  auto session = TlsSession::connect(*client, "");
  ASSERT_FALSE(session);
  EXPECT_EQ(session.error(), std::errc::invalid_argument);
  auto server = make_server(server_options());
  EXPECT_EQ(TlsSession::connect(*server, "localhost").error(), std::errc::invalid_argument);
  EXPECT_EQ(TlsSession::accept(*client).error(), std::errc::invalid_argument);
}

class MutualTls : public ::testing::TestWithParam<TlsVersion> {
 protected:
  std::shared_ptr<const TlsContext> server(VerifyClient mode) {
    auto options = server_options();
    options.client_ca = pki().ca_file;
    options.verify_client = mode;
    return make_server(options);
  }
  std::shared_ptr<const TlsContext> client(const test::IssuedCertificate* certificate) {
    auto options = client_options();
    options.max_version = GetParam();
    if (certificate != nullptr) options.certificate = files(*certificate);
    return make_client(options);
  }
  // The server's verdict. With TLS 1.3 the client finishes before the server has checked
  // its certificate: it learns of a refusal from its first read.
  std::error_code server_verdict(TlsLink& l) {
    auto outcome = l.handshake();
    if (!outcome.server && outcome.client) return outcome.client;
    if (outcome.server && l.client.established()) {
      auto seen = l.receive(l.client);
      EXPECT_TRUE(seen.error) << "the client should learn of the refusal";
    }
    return outcome.server;
  }
};

TEST_P(MutualTls, RequiredCertificateIsCheckedAndShownToTheServer) {
  auto s = server(VerifyClient::kRequire);
  auto good = link(*client(&pki().client), *s);
  ASSERT_FALSE(server_verdict(good));
  auto peer = good.server.peer_certificate();
  ASSERT_TRUE(peer);
  EXPECT_NE(peer->subject.find("CN=client.test"), std::string::npos) << peer->subject;
  EXPECT_EQ(peer->subject_alt_names, std::vector<std::string>{"DNS:client.test"});
  EXPECT_GT(peer->not_after, static_cast<int64_t>(std::time(nullptr)));

  auto without = link(*client(nullptr), *s);
  auto refused = server_verdict(without);
  EXPECT_EQ(refused, Errc::kHandshakeFailed) << refused.message();
  EXPECT_NE(refused.message().find("certificate"), std::string::npos) << refused.message();

  auto rogue = link(*client(&pki().untrusted_client), *s);
  auto untrusted = server_verdict(rogue);
  EXPECT_EQ(untrusted, Errc::kCertificateVerifyFailed) << untrusted.message();
  EXPECT_EQ(detail_of(untrusted), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

TEST_P(MutualTls, OptionalCertificateServesClientsWithoutOne) {
  auto s = server(VerifyClient::kOptional);
  auto without = link(*client(nullptr), *s);
  ASSERT_FALSE(server_verdict(without));
  EXPECT_FALSE(without.server.peer_certificate());

  auto with = link(*client(&pki().client), *s);
  ASSERT_FALSE(server_verdict(with));
  ASSERT_TRUE(with.server.peer_certificate());

  auto rogue = link(*client(&pki().untrusted_client), *s);
  EXPECT_EQ(server_verdict(rogue), Errc::kCertificateVerifyFailed);
}

TEST_P(MutualTls, NoneAsksForNoCertificate) {
  auto s = server(VerifyClient::kNone);
  auto l = link(*client(&pki().client), *s);
  ASSERT_FALSE(server_verdict(l));
  EXPECT_FALSE(l.server.peer_certificate());
}

INSTANTIATE_TEST_SUITE_P(Versions, MutualTls, ::testing::Values(TlsVersion::k1_2, TlsVersion::k1_3),
                         version_name);

class Resumption : public ::testing::TestWithParam<TlsVersion> {
 protected:
  std::shared_ptr<const TlsContext> client_context() {
    auto options = client_options();
    options.max_version = GetParam();
    return make_client(options);
  }
};

TEST_P(Resumption, TheClientCacheResumesWithATicket) {
  auto server = make_server(server_options());
  auto client = client_context();
  TlsSessionCache cache;
  auto first = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(first).ok());
  EXPECT_FALSE(first.server.resumed());
  EXPECT_EQ(cache.size(), 1u);

  auto second = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(second).ok());
  EXPECT_TRUE(second.server.resumed());
  EXPECT_TRUE(second.client.resumed());
  ASSERT_FALSE(second.send(second.client, "after resumption"));
  EXPECT_EQ(second.receive(second.server).text, "after resumption");

  // Another name has no session in the cache.
  auto other = link(*client, *server, "example.test", &cache);
  ASSERT_TRUE(connect_and_settle(other).ok());
  EXPECT_FALSE(other.server.resumed());
  EXPECT_EQ(cache.size(), 2u);
}

TEST_P(Resumption, NoTicketsMeansFullHandshakes) {
  auto options = server_options();
  options.session_tickets = false;
  auto server = make_server(options);
  EXPECT_FALSE(server->ticket_keys());
  auto client = client_context();
  TlsSessionCache cache;
  auto first = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(first).ok());
  auto second = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(second).ok());
  EXPECT_FALSE(second.server.resumed());
}

TEST_P(Resumption, ATicketFromOneContextResumesOnAnotherThreadsContextSharingTheKeys) {
  auto ring = TicketKeyRing::create(3600);
  auto options = server_options();
  options.ticket_keys = ring;
  auto worker_a = make_server(options);
  auto worker_b = make_server(options);
  auto stranger = make_server(server_options());  // a ring of its own
  EXPECT_EQ(worker_a->ticket_keys(), ring);
  auto client = client_context();
  TlsSessionCache cache;

  auto first = link(*client, *worker_a, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(first).ok());
  SSL_SESSION* found = cache.find("localhost");
  ASSERT_NE(found, nullptr);
  SSL_SESSION* ticket = SSL_SESSION_dup(found);  // TLS 1.3 tickets are spent once used
  SSL_SESSION_free(found);

  bool resumed_on_b = false;
  std::thread other([&] {
    auto second = link(*client, *worker_b, "localhost", &cache);
    resumed_on_b = connect_and_settle(second).ok() && second.server.resumed();
  });
  other.join();
  EXPECT_TRUE(resumed_on_b);

  TlsSessionCache old_ticket;
  old_ticket.store("localhost", ticket);
  auto third = link(*client, *stranger, "localhost", &old_ticket);
  ASSERT_TRUE(connect_and_settle(third).ok());
  EXPECT_FALSE(third.server.resumed()) << "another ring cannot open the ticket";
}

uint64_t fake_now = 0;
uint64_t fake_clock() noexcept { return fake_now; }

TEST_P(Resumption, RotatedKeysOpenOldTicketsForOneMoreIntervalOnly) {
  fake_now = 1000;
  auto ring = TicketKeyRing::create(100, &fake_clock);
  auto options = server_options();
  options.ticket_keys = ring;
  auto server = make_server(options);
  auto client = client_context();
  TlsSessionCache cache;
  auto first = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(first).ok());
  SSL_SESSION* issued = cache.find("localhost");  // sealed with the first key
  ASSERT_NE(issued, nullptr);
  auto resumes_with_first_ticket = [&] {
    // A copy each time: a TLS 1.3 client uses a ticket once (RFC 8446, C.4).
    TlsSessionCache one;
    one.store("localhost", SSL_SESSION_dup(issued));
    auto l = link(*client, *server, "localhost", &one);
    return connect_and_settle(l).ok() && l.server.resumed();
  };

  EXPECT_TRUE(resumes_with_first_ticket());
  fake_now += 150;  // one interval: a new key seals, the first still opens
  EXPECT_TRUE(resumes_with_first_ticket());
  EXPECT_EQ(ring->keys_made(), 2u);
  fake_now += 100;  // two: the first key is gone
  EXPECT_FALSE(resumes_with_first_ticket());
  EXPECT_EQ(ring->keys_made(), 3u);

  // Explicit rotation, the same way: a ticket survives one rotation, not two.
  auto fresh = link(*client, *server, "localhost", &cache);
  ASSERT_TRUE(connect_and_settle(fresh).ok());
  SSL_SESSION_free(issued);
  issued = cache.find("localhost");
  ring->rotate();
  EXPECT_TRUE(resumes_with_first_ticket());
  ring->rotate();
  EXPECT_FALSE(resumes_with_first_ticket());
  SSL_SESSION_free(issued);
}

INSTANTIATE_TEST_SUITE_P(Versions, Resumption,
                         ::testing::Values(TlsVersion::k1_2, TlsVersion::k1_3), version_name);

class Established : public ::testing::TestWithParam<TlsVersion> {
 protected:
  void SetUp() override {
    server_ = make_server(server_options());
    auto options = client_options();
    options.max_version = GetParam();
    client_ = make_client(options);
    link_.emplace(link(*client_, *server_));
    ASSERT_TRUE(connect_and_settle(*link_).ok());
  }
  TlsLink& l() { return *link_; }

  std::shared_ptr<const TlsContext> server_, client_;
  std::optional<TlsLink> link_;
};

TEST_P(Established, CloseNotifyEndsEachDirectionCleanly) {
  l().server.close();
  EXPECT_TRUE(l().server.closed());
  EXPECT_TRUE(l().server.has_output()) << "close_notify is queued";
  auto write_after_close = l().server.write(test::as_bytes("late"));
  ASSERT_FALSE(write_after_close);
  EXPECT_EQ(write_after_close.error(), Errc::kClosed);
  l().flush();
  auto seen = l().receive(l().client);
  EXPECT_FALSE(seen.error);
  EXPECT_TRUE(seen.peer_closed);
  EXPECT_TRUE(l().client.peer_closed());
  // The other direction is still open until the client closes too.
  ASSERT_FALSE(l().send(l().client, "last words"));
  l().client.close();
  l().flush();
  auto last = l().receive(l().server);
  EXPECT_EQ(last.text, "last words");
  EXPECT_TRUE(last.peer_closed);
  // An EOF after close_notify is clean.
  l().server.peer_eof();
  auto after = l().server.read({}, {});
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->peer_closed);
}

TEST_P(Established, EofWithoutCloseNotifyIsTruncatedAfterTheDataBeforeIt) {
  ASSERT_FALSE(l().send(l().server, "partial"));
  l().client.peer_eof();
  auto seen = l().receive(l().client);
  EXPECT_EQ(seen.text, "partial");
  EXPECT_EQ(seen.error, Errc::kTruncated);
  EXPECT_EQ(seen.error.message(), "TLS connection truncated (EOF without close_notify)");
  EXPECT_TRUE(l().client.failed());
  std::byte buffer[16];
  auto again = l().client.read({}, buffer);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), Errc::kTruncated);
}

TEST_P(Established, EofInsideARecordIsTruncated) {
  ASSERT_FALSE(l().server.write(test::as_bytes("half a record")).error());
  std::string record = test::take_output(l().server);
  record.resize(record.size() / 2);
  std::byte buffer[64];
  auto step = l().client.read(test::as_bytes(record), buffer);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->consumed, record.size()) << "OpenSSL keeps a partial record itself";
  EXPECT_EQ(step->plaintext, 0u);
  l().client.peer_eof();
  auto end = l().client.read({}, buffer);
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error(), Errc::kTruncated);
}

TEST_P(Established, BytesAfterCloseNotifyAreDiscarded) {
  l().client.close();
  std::string wire = test::take_output(l().client) + "\x17\x03\x03\x00\x05trash";
  std::byte buffer[64];
  auto step = l().server.read(test::as_bytes(wire), buffer);
  ASSERT_TRUE(step);
  EXPECT_TRUE(step->peer_closed);
  EXPECT_EQ(step->plaintext, 0u);
  EXPECT_EQ(step->consumed, wire.size());
  auto more = l().server.read(test::as_bytes("anything at all"), buffer);
  ASSERT_TRUE(more);
  EXPECT_TRUE(more->peer_closed);
  EXPECT_EQ(more->plaintext, 0u);
  EXPECT_FALSE(l().server.failed());
}

TEST_P(Established, ARecordLongerThanTlsAllowsIsRefused) {
  // An application-data record header announcing 18,433 bytes: past 16 KiB + expansion.
  const std::string header("\x17\x03\x03\x48\x01", 5);
  std::byte buffer[64];
  auto step = l().server.read(test::as_bytes(header), buffer);
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error(), Errc::kRecordOverflow) << step.error().message();
  EXPECT_TRUE(l().server.has_output()) << "a record_overflow alert for the peer";
  l().flush();
  EXPECT_TRUE(l().receive(l().client).error);
}

TEST_P(Established, AnAlertInTheMiddleOfDataEndsTheSession) {
  // The server's second record arrives damaged: the client returns the first, fails on the
  // second and answers with a fatal alert, which reaches the server amid its data.
  ASSERT_TRUE(l().server.write(test::as_bytes("before")));
  const std::string first = test::take_output(l().server);
  ASSERT_TRUE(l().server.write(test::as_bytes("after")));
  std::string second = test::take_output(l().server);
  second.back() = static_cast<char>(second.back() ^ 0x01);
  l().to_client += first + second;
  auto seen = l().receive(l().client);
  EXPECT_EQ(seen.text, "before");
  EXPECT_EQ(seen.error, Errc::kProtocolError) << seen.error.message();
  EXPECT_NE(seen.error.message().find("bad record mac"), std::string::npos) << seen.error.message();
  ASSERT_FALSE(l().to_server.empty()) << "the client's alert";
  EXPECT_EQ(l().client.write(test::as_bytes("x")).error(), Errc::kProtocolError)
      << "the failure sticks";
  l().flush();
  auto alert = l().receive(l().server);
  EXPECT_EQ(alert.error, Errc::kProtocolError) << alert.error.message();
  EXPECT_NE(alert.error.message().find("alert"), std::string::npos) << alert.error.message();
}

TEST_P(Established, SmallWritesShareRecordsAndLargeOnesSplit) {
  std::vector<std::string> pieces(100, std::string(10, 'x'));
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i][0] = static_cast<char>('a' + i % 26);
  std::vector<iovec> buffers;
  std::string expected;
  for (auto& piece : pieces) {
    buffers.push_back({piece.data(), piece.size()});
    expected += piece;
  }
  auto written = l().server.write(buffers);
  ASSERT_TRUE(written);
  EXPECT_EQ(*written, 1000u);
  // One record: 1,000 bytes plus one header and tag, not 100 of them.
  EXPECT_LT(l().server.output_size(), 1000u + 64u);
  l().flush();
  EXPECT_EQ(l().receive(l().client).text, expected);

  // Small, large (records straight from the buffer), small again.
  std::string small_a(100, 'a'), large(40000, 'b'), small_c(300, 'c');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>('A' + i % 23);
  std::vector<iovec> mixed = {{small_a.data(), small_a.size()},
                              {large.data(), large.size()},
                              {small_c.data(), small_c.size()}};
  written = l().server.write(mixed);
  ASSERT_TRUE(written);
  EXPECT_EQ(*written, 40400u);
  EXPECT_LT(l().server.output_size(), 40400u + 4 * 64u) << "three full records and a rest";
  l().flush();
  EXPECT_EQ(l().receive(l().client, 1000).text, small_a + large + small_c);

  std::string megabyte(1 << 20, 'm');
  ASSERT_TRUE(l().client.write(test::as_bytes(megabyte)));
  l().flush();
  EXPECT_EQ(l().receive(l().server).text.size(), megabyte.size());
  EXPECT_FALSE(l().server.has_output());
  EXPECT_TRUE(l().server.write(std::span<const iovec>()).value() == 0);
}

TEST_P(Established, ASmallBufferLeavesRecordsUnconsumedForTheCallerOrKeep) {
  for (const char* text : {"first record ", "second record ", "third record"}) {
    ASSERT_TRUE(l().server.write(test::as_bytes(text)));
  }
  const std::string wire = test::take_output(l().server);
  std::byte buffer[8];
  auto step = l().client.read(test::as_bytes(wire), buffer);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->plaintext, 8u);
  EXPECT_LT(step->consumed, wire.size()) << "later records stay with the caller";
  std::string text(reinterpret_cast<const char*>(buffer), step->plaintext);
  EXPECT_TRUE(l().client.has_buffered_input()) << "the rest of the first record";

  l().client.keep(test::as_bytes(wire).subspan(step->consumed));
  for (int i = 0; i < 100; ++i) {
    auto more = l().client.read({}, buffer);
    ASSERT_TRUE(more);
    if (more->plaintext == 0) break;
    text.append(reinterpret_cast<const char*>(buffer), more->plaintext);
  }
  EXPECT_EQ(text, "first record second record third record");
  EXPECT_FALSE(l().client.has_buffered_input());
}

TEST_P(Established, AKeyUpdateIsAnsweredAndDataFlowsOn) {
  if (GetParam() != TlsVersion::k1_3) GTEST_SKIP() << "KeyUpdate is TLS 1.3";
  // The client asks the server to update its keys too; OpenSSL sends the server's answer
  // before its next record (RFC 8446 allows the wait).
  ASSERT_EQ(SSL_key_update(l().client.native_handle(), SSL_KEY_UPDATE_REQUESTED), 1);
  ASSERT_FALSE(l().send(l().client, "after the update"));
  EXPECT_EQ(l().receive(l().server).text, "after the update");
  EXPECT_EQ(SSL_get_key_update_type(l().server.native_handle()), SSL_KEY_UPDATE_NOT_REQUESTED)
      << "the server's own KeyUpdate is due";
  ASSERT_FALSE(l().send(l().server, "answered"));
  EXPECT_EQ(SSL_get_key_update_type(l().server.native_handle()), SSL_KEY_UPDATE_NONE)
      << "and went out with its write";
  EXPECT_EQ(l().receive(l().client).text, "answered");
  ASSERT_FALSE(l().send(l().client, "and again"));
  EXPECT_EQ(l().receive(l().server).text, "and again");
}

TEST_P(Established, HandshakeAfterItIsDoneConsumesNothing) {
  auto step = l().server.handshake(test::as_bytes("data"));
  ASSERT_TRUE(step);
  EXPECT_TRUE(step->established);
  EXPECT_EQ(step->consumed, 0u);
}

INSTANTIATE_TEST_SUITE_P(Versions, Established,
                         ::testing::Values(TlsVersion::k1_2, TlsVersion::k1_3), version_name);

TEST(TlsSession, RenegotiationFromATls12ClientIsRefused) {
  auto server = make_server(server_options());
  auto options = client_options();
  options.max_version = TlsVersion::k1_2;
  auto l = link(*make_client(options), *server);
  ASSERT_TRUE(l.handshake().ok());
  // A hostile client: clear UCP's refusal on its side and start a renegotiation.
  SSL* client = l.client.native_handle();
  SSL_clear_options(client, SSL_OP_NO_RENEGOTIATION);
  ASSERT_EQ(SSL_renegotiate(client), 1);
  SSL_do_handshake(client);  // queues a new ClientHello
  l.flush();
  auto seen = l.receive(l.server);
  EXPECT_EQ(seen.error, Errc::kRenegotiationRefused) << seen.error.message();
  EXPECT_FALSE(l.to_client.empty()) << "a no_renegotiation alert for the client";
  EXPECT_TRUE(l.server.failed());
  // The client's renegotiation never completes.
  auto answer = l.receive(l.client);
  EXPECT_TRUE(answer.text.empty());
  EXPECT_NE(SSL_is_init_finished(client), 1);
}

TEST(TlsSession, GarbageInsteadOfAClientHelloFailsTheHandshake) {
  auto server = make_server(server_options());
  auto http = TlsSession::accept(*server);
  auto step = http->handshake(test::as_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error(), Errc::kNotTls);
  EXPECT_EQ(to_string(reason_of(step.error())), "not_tls");

  for (std::string garbage : {std::string(300, '\0'), std::string(300, '\xff'),
                              std::string("\x16\x03\x01\x00\x05hello", 10),
                              std::string("\x15\x03\x03\x00\x02\x02\x28", 7)}) {
    auto session = TlsSession::accept(*server);
    auto result = session->handshake(test::as_bytes(garbage));
    ASSERT_FALSE(result) << "garbage of " << garbage.size() << " bytes";
    const Errc reason = reason_of(result.error());
    EXPECT_TRUE(reason == Errc::kHandshakeFailed || reason == Errc::kRecordOverflow)
        << result.error().message();
    EXPECT_TRUE(session->failed());
  }
}

TEST(TlsSession, AClientHelloFedOneByteAtATimeCompletes) {
  auto server = make_server(server_options());
  auto client = make_client(client_options());
  auto l = link(*client, *server);
  ASSERT_TRUE(l.client.handshake());
  const std::string hello = test::take_output(l.client);
  ASSERT_GT(hello.size(), 100u);
  for (size_t i = 0; i < hello.size(); ++i) {
    auto step = l.server.handshake(test::as_bytes(hello).subspan(i, 1));
    ASSERT_TRUE(step) << "byte " << i << ": " << step.error().message();
    EXPECT_EQ(step->consumed, 1u);
    EXPECT_FALSE(step->established);
    if (i + 1 < hello.size()) {
      ASSERT_FALSE(l.server.has_output()) << "answered at byte " << i;
    }
  }
  EXPECT_TRUE(l.server.has_output()) << "the ServerHello flight";
  ASSERT_TRUE(l.handshake().ok());
  ASSERT_FALSE(l.send(l.client, "one byte at a time"));
  EXPECT_EQ(l.receive(l.server, 1).text, "one byte at a time");
}

TEST(TlsSession, ReadAndWriteBeforeTheHandshakeAreRefused) {
  auto server = make_server(server_options());
  auto session = TlsSession::accept(*server);
  std::byte buffer[16];
  EXPECT_EQ(session->read({}, buffer).error(), Errc::kNotEstablished);
  EXPECT_EQ(session->write(test::as_bytes("early")).error(), Errc::kNotEstablished);
  session->close();  // nothing to say yet
  EXPECT_FALSE(session->has_output());
}

TEST(TlsSession, AnEofDuringTheHandshakeIsTruncated) {
  auto server = make_server(server_options());
  auto client = make_client(client_options());
  auto l = link(*client, *server);
  ASSERT_TRUE(l.client.handshake());
  const std::string hello = test::take_output(l.client);
  auto step = l.server.handshake(test::as_bytes(hello).first(hello.size() / 2));
  ASSERT_TRUE(step);
  l.server.peer_eof();
  auto end = l.server.handshake();
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error(), Errc::kTruncated);
}

TEST(TlsSession, AMovedSessionCarriesOnWhereItWas) {
  auto server = make_server(server_options());
  auto client = make_client(client_options());
  auto c = TlsSession::connect(*client, "localhost");
  auto s = TlsSession::accept(*server);
  ASSERT_TRUE(c && s);
  ASSERT_TRUE(c->handshake());
  std::string hello = test::take_output(*c);
  TlsSession moved(std::move(*s));
  ASSERT_TRUE(moved.handshake(test::as_bytes(hello).first(10)));
  TlsSession assigned;
  assigned = std::move(moved);
  ASSERT_TRUE(assigned.handshake(test::as_bytes(hello).subspan(10)));
  TlsLink l(std::move(*c), std::move(assigned));
  l.flush();
  ASSERT_TRUE(l.handshake().ok());
  ASSERT_FALSE(l.send(l.server, "moved"));
  EXPECT_EQ(l.receive(l.client).text, "moved");
}

TEST(TlsSession, CountersAddUpHandshakesByOutcome) {
  auto server = make_server(server_options());
  TlsSessionCache cache;
  TlsCounters worker_a, worker_b;
  for (auto version : {TlsVersion::k1_2, TlsVersion::k1_3, TlsVersion::k1_3}) {
    auto options = client_options();
    options.max_version = version;
    auto l = link(*make_client(options), *server, "localhost",
                  version == TlsVersion::k1_3 ? &cache : nullptr);
    ASSERT_TRUE(connect_and_settle(l).ok());
    worker_a.record(l.server);
  }
  auto none = client_options();
  none.alpn = {};
  auto plain = link(*make_client(none), *server);
  ASSERT_TRUE(plain.handshake().ok());
  worker_b.record(plain.server);
  worker_b.record_failure(make_error_code(Errc::kCertificateVerifyFailed, 20));
  worker_b.record_failure(make_error_code(Errc::kHandshakeTimeout));
  worker_b.record_failure(std::make_error_code(std::errc::connection_reset));

  TlsCounters total;
  total += worker_a;
  total += worker_b;
  EXPECT_EQ(total.handshakes_ok, 4u);
  EXPECT_EQ(total.resumed, 1u) << "the second 1.3 connection resumed the first's ticket";
  EXPECT_EQ(total.tls1_2, 1u);
  EXPECT_EQ(total.tls1_3, 3u);
  EXPECT_EQ(total.alpn[0], 3u);
  EXPECT_EQ(total.no_alpn, 1u);
  EXPECT_EQ(total.handshakes_failed_total(), 3u);
  EXPECT_EQ(total.handshakes_failed[static_cast<size_t>(Errc::kCertificateVerifyFailed)], 1u);
  EXPECT_EQ(total.handshakes_failed[static_cast<size_t>(Errc::kHandshakeTimeout)], 1u);
  EXPECT_EQ(total.handshakes_failed[0], 1u) << "not a TLS error";
}

TEST(TlsError, ReasonsCompareWithoutTheirDetail) {
  const std::error_code expired =
      make_error_code(Errc::kCertificateVerifyFailed, X509_V_ERR_CERT_HAS_EXPIRED);
  EXPECT_EQ(expired, Errc::kCertificateVerifyFailed);
  EXPECT_NE(expired, Errc::kHandshakeFailed);
  EXPECT_EQ(reason_of(expired), Errc::kCertificateVerifyFailed);
  EXPECT_EQ(detail_of(expired), X509_V_ERR_CERT_HAS_EXPIRED);
  EXPECT_EQ(expired.message(), "TLS certificate verify failed: certificate has expired");
  EXPECT_STREQ(expired.category().name(), "tls");
  const std::error_code no_cipher = make_error_code(Errc::kHandshakeFailed, SSL_R_NO_SHARED_CIPHER);
  EXPECT_EQ(no_cipher.message(), "TLS handshake failed: no shared cipher");
  EXPECT_EQ(make_error_code(Errc::kTruncated), Errc::kTruncated);
  EXPECT_EQ(reason_of(std::make_error_code(std::errc::timed_out)), Errc{});
  EXPECT_EQ(to_string(Errc::kCertificateVerifyFailed), "certificate_verify_failed");
  EXPECT_EQ(to_string(Errc::kHandshakeTimeout), "timeout");
}

}  // namespace
}  // namespace ucp::tls
