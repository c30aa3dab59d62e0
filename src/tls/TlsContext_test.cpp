#include "ucp/tls/TlsContext.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "ucp/tls/TicketKeyRing.h"
#include "ucp/tls/TlsContextHolder.h"
#include "ucp/tls/TlsSession.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

namespace fs = std::filesystem;
const test::TestPki& pki() { return test::TestPki::get(); }

// A scratch directory of the test's own, removed at the end.
class TlsContextFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ucp-tls-context-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string copy(const std::string& from, const std::string& name) {
    const std::string path = dir_ + "/" + name;
    fs::copy_file(from, path, fs::copy_options::overwrite_existing);
    return path;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  std::string server_error(const std::string& certificate, const std::string& key) {
    TlsOptions options;
    options.certificates = {{certificate, key}};
    auto context = TlsContext::server(options);
    EXPECT_FALSE(context);
    return context ? std::string() : context.error().message;
  }

  std::string dir_;
};

TEST_F(TlsContextFiles, AMissingFileIsNamedWithTheSystemsReason) {
  const auto& p = pki();
  EXPECT_EQ(server_error(dir_ + "/none.pem", p.ecdsa.private_key),
            "certificate file " + dir_ + "/none.pem: No such file or directory");
  EXPECT_EQ(server_error(p.ecdsa.certificate, dir_ + "/none.key"),
            "private key file " + dir_ + "/none.key: No such file or directory");
  EXPECT_EQ(server_error(dir_, p.ecdsa.private_key),
            "certificate file " + dir_ + ": Is a directory");
  TlsOptions none;
  auto context = TlsContext::server(none);
  ASSERT_FALSE(context);
  EXPECT_EQ(context.error().message, "TLS server: no certificate (certificate and private_key)");
}

TEST_F(TlsContextFiles, BadPemIsRefusedWithWhatIsWrong) {
  const auto& p = pki();
  const std::string garbage = write("garbage.pem", "this is not a certificate\n");
  EXPECT_EQ(server_error(garbage, p.ecdsa.private_key),
            "certificate file " + garbage + ": no PEM certificate in it");
  const std::string broken = write(
      "broken.pem", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n");
  const std::string broken_error = server_error(broken, p.ecdsa.private_key);
  EXPECT_EQ(broken_error.rfind("certificate file " + broken + ": bad PEM certificate (", 0), 0u)
      << broken_error;
  // A certificate where the key should be.
  EXPECT_EQ(server_error(p.ecdsa.certificate, p.ecdsa.certificate),
            "private key file " + p.ecdsa.certificate + ": no PEM private key in it");
}

TEST_F(TlsContextFiles, AKeyThatDoesNotMatchTheCertificateIsRefused) {
  const auto& p = pki();
  EXPECT_EQ(server_error(p.ecdsa.certificate, p.rsa.private_key),
            "private key file " + p.rsa.private_key + " does not match certificate file " +
                p.ecdsa.certificate);
  EXPECT_EQ(server_error(p.rsa.certificate, p.client.private_key),
            "private key file " + p.client.private_key + " does not match certificate file " +
                p.rsa.certificate);
}

TEST_F(TlsContextFiles, AnEncryptedKeyIsRefusedNotPrompted) {
  const auto& p = pki();
  std::FILE* in = std::fopen(p.ecdsa.private_key.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  EVP_PKEY* key = PEM_read_PrivateKey(in, nullptr, nullptr, nullptr);
  std::fclose(in);
  ASSERT_NE(key, nullptr);
  const std::string path = dir_ + "/encrypted.key";
  std::FILE* out = std::fopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  static const char kPassword[] = "secret";
  ASSERT_EQ(PEM_write_PrivateKey(out, key, EVP_aes_256_cbc(), nullptr, 0, nullptr,
                                 const_cast<char*>(kPassword)),
            1);
  std::fclose(out);
  EVP_PKEY_free(key);
  const std::string error = server_error(p.ecdsa.certificate, path);
  EXPECT_EQ(error.rfind("private key file " + path +
                            ": not a usable PEM private key, or an "
                            "encrypted one",
                        0),
            0u)
      << error;
}

TEST_F(TlsContextFiles, ACertificateChainFileServesItsIntermediates) {
  // leaf + intermediate in one file; the client trusts only the root.
  const auto& p = pki();
  const std::string chain =
      write("chain.pem", read(p.ecdsa.certificate) + read(p.ca->certificate_file()));
  TlsOptions options;
  options.certificates = {{chain, p.ecdsa.private_key}};
  auto server = TlsContext::server(options);
  ASSERT_TRUE(server) << server.error().message;
  TlsClientOptions client_options;
  client_options.ca_file = p.ca_file;
  auto client = TlsContext::client(client_options);
  ASSERT_TRUE(client) << client.error().message;
  test::TlsLink l(*TlsSession::connect(**client, "localhost"), *TlsSession::accept(**server));
  ASSERT_TRUE(l.handshake().ok());
  // Two certificates on the wire: the client saw the chain the file holds.
  EXPECT_EQ(sk_X509_num(SSL_get_peer_cert_chain(l.client.native_handle())), 2);
}

TEST_F(TlsContextFiles, SettingsOutsideWhatTlsAllowsAreRefused) {
  const auto& p = pki();
  auto refused = [&](auto change) {
    TlsOptions options;
    options.certificates = {{p.ecdsa.certificate, p.ecdsa.private_key}};
    change(options);
    auto context = TlsContext::server(options);
    EXPECT_FALSE(context);
    return context ? std::string() : context.error().message;
  };
  EXPECT_EQ(refused([](TlsOptions& o) { o.ciphers = "NOT-A-CIPHER"; }),
            "TLS ciphers 'NOT-A-CIPHER': no cipher OpenSSL knows in the list");
  EXPECT_EQ(refused([](TlsOptions& o) { o.ciphersuites = "TLS_NOPE"; }),
            "TLS 1.3 ciphersuites 'TLS_NOPE': not a valid list");
  EXPECT_EQ(refused([](TlsOptions& o) { o.groups = "P-0"; }), "TLS groups 'P-0': not a valid list");
  EXPECT_EQ(refused([](TlsOptions& o) {
              o.min_version = TlsVersion::k1_3;
              o.max_version = TlsVersion::k1_2;
            }),
            "TLS min_version 1.3 is above max_version 1.2");
  EXPECT_EQ(refused([](TlsOptions& o) { o.alpn = {"a", "b", "c", "d", "e", "f", "g", "h", "i"}; }),
            "TLS alpn: at most 8 protocols");
  EXPECT_EQ(refused([](TlsOptions& o) { o.alpn = {""}; }),
            "TLS alpn: '' is not 1 to 255 bytes long");
  EXPECT_EQ(refused([](TlsOptions& o) { o.verify_client = VerifyClient::kRequire; }),
            "TLS verify_client: client certificates need a client_ca file");
  EXPECT_EQ(refused([&](TlsOptions& o) {
              o.verify_client = VerifyClient::kOptional;
              o.client_ca = dir_ + "/ca.pem";
            }),
            "client CA file " + dir_ + "/ca.pem: No such file or directory");

  TlsClientOptions client;
  client.ca_file = dir_ + "/missing-ca.pem";
  auto context = TlsContext::client(client);
  ASSERT_FALSE(context);
  EXPECT_EQ(context.error().message,
            "CA file " + dir_ + "/missing-ca.pem: No such file or directory");
}

TEST_F(TlsContextFiles, NeitherVersionBelow12NorWeakCiphersAreOffered) {
  TlsOptions options;
  options.certificates = {{pki().ecdsa.certificate, pki().ecdsa.private_key}};
  auto context = TlsContext::server(options);
  ASSERT_TRUE(context);
  SSL_CTX* ctx = (*context)->native_handle();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_NO_RENEGOTIATION, 0u);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_NO_COMPRESSION, 0u);
  EXPECT_EQ(SSL_CTX_get_options(ctx) & SSL_OP_IGNORE_UNEXPECTED_EOF, 0u);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_CIPHER_SERVER_PREFERENCE, 0u);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_PRIORITIZE_CHACHA, 0u);
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(ctx);
  ASSERT_NE(ciphers, nullptr);
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* cipher = sk_SSL_CIPHER_value(ciphers, i);
    const std::string name = SSL_CIPHER_get_name(cipher);
    EXPECT_EQ(SSL_CIPHER_is_aead(cipher), 1) << name;
    const int kx = SSL_CIPHER_get_kx_nid(cipher);
    EXPECT_TRUE(kx == NID_kx_ecdhe || kx == NID_kx_any) << name << " has no forward secrecy";
  }
}

TEST_F(TlsContextFiles, ReloadSwapsTheCertificateForNewSessionsOnly) {
  const auto& p = pki();
  const std::string certificate = copy(p.ecdsa.certificate, "server.crt");
  const std::string key = copy(p.ecdsa.private_key, "server.key");
  TlsOptions options;
  options.certificates = {{certificate, key}};
  TlsContextHolder holder;
  EXPECT_EQ(holder.current(), nullptr);
  EXPECT_FALSE(holder.reload());
  ASSERT_TRUE(holder.load(options));
  EXPECT_EQ(holder.generation(), 1u);
  auto first = holder.current();
  ASSERT_TRUE(first->ticket_keys()) << "the holder made the ring, for every reload to share";

  TlsClientOptions client_options;
  client_options.ca_file = p.ca_file;
  auto client = TlsContext::client(client_options);
  ASSERT_TRUE(client);
  auto peer_subject = [&](test::TlsLink& l) {
    auto peer = l.client.peer_certificate();
    return peer ? peer->subject : std::string();
  };
  test::TlsLink old_link(*TlsSession::connect(**client, "localhost"),
                         *TlsSession::accept(*holder.current()));
  ASSERT_TRUE(old_link.handshake().ok());
  EXPECT_NE(peer_subject(old_link).find("CN=localhost"), std::string::npos);

  // New files, then a reload: new sessions get the new certificate.
  auto reissued =
      p.ca->issue(dir_ + "/next", test::certificate_request("localhost", {"localhost"}));
  copy(reissued.certificate, "server.crt");
  copy(reissued.private_key, "server.key");
  auto reloaded = holder.reload();
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  EXPECT_EQ(holder.generation(), 2u);
  auto second = holder.current();
  EXPECT_NE(second, first);
  EXPECT_EQ(second->ticket_keys(), first->ticket_keys());
  test::TlsLink new_link(*TlsSession::connect(**client, "localhost"), *TlsSession::accept(*second));
  ASSERT_TRUE(new_link.handshake().ok());
  EXPECT_NE(SSL_get0_peer_certificate(new_link.client.native_handle()),
            SSL_get0_peer_certificate(old_link.client.native_handle()));
  EXPECT_NE(X509_cmp(SSL_get0_peer_certificate(new_link.client.native_handle()),
                     SSL_get0_peer_certificate(old_link.client.native_handle())),
            0)
      << "the new session shows the reissued certificate";

  // The old session goes on, even once nothing else holds its context.
  first.reset();
  ASSERT_FALSE(old_link.send(old_link.client, "still here"));
  EXPECT_EQ(old_link.receive(old_link.server).text, "still here");

  // A bad new file: the reload fails, the current context stays.
  write("server.key", "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n");
  auto bad = holder.reload();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("private key file " + key + ": ", 0), 0u)
      << bad.error().message;
  EXPECT_EQ(holder.generation(), 2u);
  EXPECT_EQ(holder.current(), second);
  copy(p.rsa.private_key, "server.key");
  auto mismatch = holder.reload();
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().message,
            "private key file " + key + " does not match certificate file " + certificate);
  EXPECT_EQ(holder.current(), second);
  test::TlsLink after(*TlsSession::connect(**client, "localhost"),
                      *TlsSession::accept(*holder.current()));
  EXPECT_TRUE(after.handshake().ok());
}

TEST(TlsContext, TellsServerFromClient) {
  TlsOptions options;
  options.certificates = {{pki().ecdsa.certificate, pki().ecdsa.private_key}};
  options.alpn = {"h2", "http/1.1"};
  auto server = TlsContext::server(options);
  ASSERT_TRUE(server);
  EXPECT_TRUE((*server)->is_server());
  ASSERT_EQ((*server)->alpn_protocols().size(), 2u);
  EXPECT_EQ((*server)->alpn_protocols()[1], "http/1.1");
  auto client = TlsContext::client({});
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_FALSE((*client)->is_server());
  EXPECT_FALSE((*client)->ticket_keys());
}

}  // namespace
}  // namespace ucp::tls
