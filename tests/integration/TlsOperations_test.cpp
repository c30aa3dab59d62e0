// [tls] in operation, on bin/http_server as a process, on both backends:
// - SIGHUP with a new certificate while wrk runs over HTTPS (every request on a connection of
//   its own, so handshakes straddle each reload): not one failed request, and a connection
//   made after the last reload gets the new certificate (its SHA-256 fingerprint);
// - a SIGHUP applies every [tls] key but tls.enable (min_version here), and says "applied";
// - 10,000 handshakes refused for want of a client certificate (verify_client = require) leave
//   the server's RSS where it was after a warm-up of 1,000.
// Certificates are made with `openssl req`, as a user would.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "BackendProbe.h"
#include "Command.h"
#include "ServerProcess.h"
#include "TlsTestClient.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UCP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UCP_SANITIZED 1
#endif
#endif

namespace ucp::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A scratch directory with self-signed ECDSA P-256 certificates for localhost: `serving`
/// (cert.pem, key.pem: what the server reads) and spares to copy over it.
class Certificates {
 public:
  Certificates() {
    char name[] = "/tmp/ucp-tlsops-XXXXXX";
    dir_ = ::mkdtemp(name);
  }
  ~Certificates() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  /// Makes NAME.cert.pem and NAME.key.pem.
  bool make(const std::string& name) {
    return run_command({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout",
                        key(name), "-out", certificate(name)},
                       20000)
               .exit_code == 0;
  }
  /// Puts NAME's pair in place of the served one (each file replaced by a rename).
  void serve(const std::string& name) const {
    for (const auto& [from, to] : {std::pair{certificate(name), certificate("serving")},
                                   std::pair{key(name), key("serving")}}) {
      fs::copy_file(from, to + ".new", fs::copy_options::overwrite_existing);
      fs::rename(to + ".new", to);
    }
  }
  std::string certificate(const std::string& name) const { return dir_ + "/" + name + ".cert.pem"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key.pem"; }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

/// The SHA-256 digest of a certificate, as bytes.
std::string fingerprint(X509* certificate) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (certificate == nullptr || X509_digest(certificate, EVP_sha256(), digest, &size) != 1) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string file_fingerprint(const std::string& pem) {
  FILE* file = std::fopen(pem.c_str(), "r");
  if (file == nullptr) return {};
  X509* certificate = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  std::string digest = fingerprint(certificate);
  X509_free(certificate);
  return digest;
}

TlsClientSettings pinned(int version) {
  TlsClientSettings settings;
  settings.version = version;
  return settings;
}

/// The fingerprint of the certificate a new connection to `port` is served.
std::string served_fingerprint(uint16_t port) {
  auto client = TlsTestClient::connect(port, {});
  if (!client) return "handshake failed: " + client.error();
  X509* peer = SSL_get1_peer_certificate(client.ssl());
  std::string digest = fingerprint(peer);
  X509_free(peer);
  client.close_notify();
  return digest;
}

class TlsOperations : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_NAMED_BACKEND_USABLE(GetParam());
    if (!have_program("openssl")) GTEST_SKIP() << "openssl is not installed";
    ASSERT_TRUE(files_.make("first") && files_.make("second"));
    files_.serve("first");
  }

  /// bin/http_server over HTTPS with the served pair, on the backend under test.
  ServerProcess::Options http_server(std::vector<std::string> more = {}) const {
    ServerProcess::Options options;
    options.binary = UCP_BIN_DIR "/http_server";
    options.overrides = {"tls.enable=true",
                         "tls.certificate=" + files_.certificate("serving"),
                         "tls.private_key=" + files_.key("serving"),
                         "http.root=" + files_.dir(),
                         "server.thread_num=2",
                         "event_loop.backend=" + GetParam()};
    for (auto& o : more) options.overrides.push_back(std::move(o));
    return options;
  }

  Certificates files_;
};

INSTANTIATE_TEST_SUITE_P(Backends, TlsOperations, kBackendNames,
                         [](const auto& param_info) { return param_info.param; });

TEST_P(TlsOperations, SighupSwapsTheCertificateUnderWrkWithZeroFailedRequests) {
  if (!have_program("wrk")) GTEST_SKIP() << "wrk is not installed (scripts/install-deps.sh test)";
  ServerProcess server(http_server());
  UCP_START_SERVER(server);
  const std::string first = file_fingerprint(files_.certificate("first"));
  const std::string second = file_fingerprint(files_.certificate("second"));
  ASSERT_FALSE(first.empty());
  ASSERT_NE(first, second);
  EXPECT_EQ(served_fingerprint(server.port()), first);

  // "Connection: close": every request is a handshake of its own, so that handshakes are under
  // way whenever a reload replaces the context.
  CommandResult load;
  std::atomic<bool> load_done{false};
  std::thread wrk([&] {
    load = run_command({"wrk", "-t1", "-c8", "-d3s", "--timeout", "2s", "-H", "Connection: close",
                        "https://127.0.0.1:" + std::to_string(server.port()) + "/healthz"},
                       30000);
    load_done = true;
  });
  std::this_thread::sleep_for(500ms);  // the load runs on the first certificate first
  // Five reloads, alternating the pairs, each awaited in the log: the second is served last.
  // wrk runs on (it is joined before any assertion can return).
  constexpr size_t kReloads = 5;
  size_t reloaded = 0;
  size_t under_load = 0;
  for (size_t i = 1; i <= kReloads; ++i) {
    files_.serve(i % 2 == 1 ? "second" : "first");
    server.send_signal(SIGHUP);
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (server.count_output_lines("tls: certificate files read again") < i &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    if (server.count_output_lines("tls: certificate files read again") != i) break;
    ++reloaded;
    under_load += !load_done;
    std::this_thread::sleep_for(200ms);  // handshakes on this certificate before the next
  }
  wrk.join();
  ASSERT_EQ(reloaded, kReloads) << server.output_tail();
  EXPECT_GE(under_load, 2u) << "wrk ended before the reloads did";
  EXPECT_EQ(server.count_output_lines("keeping the running configuration"), 0u)
      << server.output_tail();

  ASSERT_EQ(load.exit_code, 0) << load.output;
  std::smatch count;
  ASSERT_TRUE(std::regex_search(load.output, count, std::regex(R"((\d+) requests in)")))
      << load.output;
  EXPECT_GT(std::stoll(count[1]), 50) << load.output;
  EXPECT_EQ(load.output.find("Socket errors"), std::string::npos) << load.output;
  EXPECT_EQ(load.output.find("Non-2xx"), std::string::npos) << load.output;
  std::printf("[ wrk      ] %s\n", load.output.c_str());
  // Every request had a handshake of its own (the workers' counters on /metrics).
  if (have_program("curl")) {
    auto scrape = run_command({"curl", "-sS", "-k", "--max-time", "10",
                               "https://127.0.0.1:" + std::to_string(server.port()) + "/metrics"},
                              20000);
    uint64_t handshakes = 0;
    const std::regex ok(R"(ucp_tls_handshakes_total\{worker="\d+",result="ok"\} (\d+))");
    for (std::sregex_iterator it(scrape.output.begin(), scrape.output.end(), ok), end; it != end;
         ++it) {
      handshakes += std::stoull((*it)[1]);
    }
    EXPECT_GE(handshakes, std::stoull(count[1])) << scrape.output;
  }

  // A connection made now gets the certificate of the last reload.
  EXPECT_EQ(served_fingerprint(server.port()), second);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST_P(TlsOperations, SighupAppliesMinVersionAndSaysSo) {
  // The configuration in a file of its own, rewritten between the two starts of TLS 1.2.
  const std::string config = files_.path("ucp.conf");
  const auto write_config = [&](const std::string& min_version) {
    std::ofstream(config) << "[server]\nip = 127.0.0.1\nport = 0\nthread_num = 1\n"
                          << "[log]\nconsole = true\nlevel = INFO\nfile =\nflush_interval_ms = 20\n"
                          << "[tls]\nmin_version = " << min_version << "\n";
  };
  write_config("1.2");
  ServerProcess::Options options = http_server();
  options.config_path = config;
  ServerProcess server(options);
  UCP_START_SERVER(server);
  const TlsClientSettings tls12 = pinned(TLS1_2_VERSION);
  EXPECT_TRUE(TlsTestClient::connect(server.port(), tls12)) << "TLS 1.2 before the reload";

  write_config("1.3");
  server.send_signal(SIGHUP);
  ASSERT_TRUE(server.wait_for_output("tls.min_version: 1.2 -> 1.3 (applied)", 15000))
      << server.output_tail();
  ASSERT_TRUE(server.wait_for_output("tls: certificate files read again", 15000))
      << server.output_tail();
  auto refused = TlsTestClient::connect(server.port(), tls12);
  EXPECT_FALSE(refused) << "TLS 1.2 after min_version = 1.3";
  EXPECT_TRUE(TlsTestClient::connect(server.port(), pinned(TLS1_3_VERSION)));
  EXPECT_EQ(server.count_output_lines("takes effect at the next start"), 0u)
      << server.output_tail();
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Clients without a certificate, against a server that requires one: TLS 1.3, so each client
// finishes its side of the handshake and then reads the server's alert. One SSL_CTX for all
// (making one per connection would cost more than the handshake). False at the first
// connection that was not refused.
bool refused_handshakes_serially(uint16_t port, int count, std::string& why) {
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  bool all = true;
  for (int i = 0; i < count && all; ++i) {
    auto connected = connect_loopback(port);
    if (!connected) {
      why = "connection " + std::to_string(i) + ": connect failed";
      all = false;
      break;
    }
    const int fd = connected->get();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    timeval timeout{10, 0};  // bounds every blocking call below
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    SSL* ssl = SSL_new(context);
    SSL_set_fd(ssl, fd);
    char byte = 0;
    size_t n = 0;
    if (SSL_connect(ssl) != 1) {
      why = "connection " + std::to_string(i) +
            ": the client's handshake failed: " + openssl_errors();
      all = false;
    } else if (SSL_read_ex(ssl, &byte, 1, &n) == 1 ||
               SSL_get_error(ssl, 0) != SSL_ERROR_SSL) {  // the alert, not a timeout or EOF
      why = "connection " + std::to_string(i) + " was not refused by an alert";
      all = false;
    }
    ERR_clear_error();
    SSL_free(ssl);
  }
  SSL_CTX_free(context);
  return all;
}

// The same from two client threads (the server's one worker is then the bottleneck).
bool refused_handshakes(uint16_t port, int count, std::string& why) {
  std::string why_other;
  bool other = false;
  std::thread helper([&] { other = refused_handshakes_serially(port, count / 2, why_other); });
  const bool mine = refused_handshakes_serially(port, count - count / 2, why);
  helper.join();
  if (!other) why += "; " + why_other;
  return mine && other;
}

TEST_P(TlsOperations, TenThousandRefusedClientCertificatesLeaveRssFlat) {
#ifdef UCP_SANITIZED
  // A sanitizer's quarantine holds freed memory (RSS grew 1.5 MiB under ASan): its leak check
  // at the server's exit is the test there, after fewer handshakes.
  constexpr int kMeasured = 2000;
#else
  constexpr int kMeasured = 10000;
#endif
  // One worker. Any CA will do: no client presents a certificate.
  ServerProcess server(http_server({"server.thread_num=1", "tls.verify_client=require",
                                    "tls.client_ca=" + files_.certificate("second")}));
  UCP_START_SERVER(server);
  const auto started = std::chrono::steady_clock::now();
  std::string why;
  // OpenSSL's caches, the allocator's arenas.
  ASSERT_TRUE(refused_handshakes(server.port(), 1000, why)) << why << server.output_tail();
  const int64_t warm = server.rss_kb();
  ASSERT_TRUE(refused_handshakes(server.port(), kMeasured, why)) << why << server.output_tail();
  const int64_t after = server.rss_kb();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf(
      "[ rss      ] %d refused handshakes in %.1f s (server CPU %.1f s): RSS %lld KiB after "
      "1,000, %lld KiB after %d more (%+lld KiB)\n",
      1000 + kMeasured, seconds, server.cpu_seconds(), static_cast<long long>(warm),
      static_cast<long long>(after), kMeasured, static_cast<long long>(after - warm));
  ASSERT_GT(warm, 0);
#ifndef UCP_SANITIZED
  EXPECT_LT(after - warm, 1024) << "RSS grew by more than 1 MiB";
#endif
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("ERROR"), 0u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
