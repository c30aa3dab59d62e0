// The server examples run on the application runtime: each takes the generated config file
// (loopback, port 0), says where it listens, serves, and stops cleanly on SIGTERM (exit 0).
// example_udp_echo is a LoopService: one loop, one coroutine, the runtime's signals.
// example_https_hello serves HTTPS with a CA-signed certificate to curl --cacert, and takes a
// new certificate on SIGHUP (a bad one keeps the running one).

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "Command.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
#include "ScratchDir.h"
#include "ServerProcess.h"
#include "TestCertificates.h"

namespace ucp::test {
namespace {

ServerProcess::Options example(const std::string& name, std::vector<std::string> overrides = {}) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/example_" + name;
  options.overrides = std::move(overrides);
  return options;
}

TEST(ExampleServers, EchoServer) {
  ServerProcess server(example("echo_server"));
  UCP_START_SERVER(server);
  auto fd = connect_loopback(server.port());
  ASSERT_TRUE(fd);
  const std::string message = "hello, echo";
  std::string scratch(message.size(), '\0');
  EXPECT_TRUE(echo_round_trip(fd->get(), message, scratch, 5000));
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST(ExampleServers, HttpHelloTakesItsOwnKey) {
  ServerProcess server(example("http_hello", {"hello.greeting=Bonjour"}));
  UCP_START_SERVER(server);
  auto reply = http_exchange(
      server.port(), "GET /hello/world HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5000);
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body, "Bonjour, world!\n");
  EXPECT_EQ(reply->header("x-served-by"), "ucp");
  EXPECT_TRUE(server.stop(SIGINT).clean()) << server.output_tail();
}

// GET /hello/world from curl --cacert over TLS: the body, or why there is none.
std::string fetch_hello(uint16_t port, const std::string& ca_file, const std::string& tls_max) {
  const std::string where = "localhost:" + std::to_string(port);
  auto fetched =
      run_command({"curl", "-sS", "--max-time", "10", "--cacert", ca_file, "--tls-max", tls_max,
                   "--resolve", where + ":127.0.0.1", "https://" + where + "/hello/world"},
                  20000);
  return fetched.exit_code == 0 ? fetched.output : "curl failed: " + fetched.output;
}

TEST(ExampleServers, HttpsHelloServesCurlOverTls) {
  if (!have_program("curl")) GTEST_SKIP() << "curl not installed (make test installs it)";
  const TestPki& pki = TestPki::get();  // a leaf for localhost and 127.0.0.1, signed by a CA
  for (const std::string backend : {"io_uring", "epoll"}) {
    SCOPED_TRACE(backend);
    ServerProcess server(example("https_hello", {"tls.certificate=" + pki.ecdsa.certificate,
                                                 "tls.private_key=" + pki.ecdsa.private_key,
                                                 "event_loop.backend=" + backend}));
    UCP_START_SERVER(server);
    // The handler's line from Request::tls(): version, cipher (the client's choice), ALPN.
    const std::string tls13 = fetch_hello(server.port(), pki.ca_file, "1.3");
    EXPECT_EQ(tls13.rfind("Hello, world!\nTLSv1.3 TLS_", 0), 0u) << tls13;
    EXPECT_TRUE(tls13.ends_with(" ALPN http/1.1\n")) << tls13;
    const std::string tls12 = fetch_hello(server.port(), pki.ca_file, "1.2");
    EXPECT_EQ(tls12.rfind("Hello, world!\nTLSv1.2 ECDHE-ECDSA-", 0), 0u) << tls12;
    EXPECT_TRUE(tls12.ends_with(" ALPN http/1.1\n")) << tls12;
    EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  }
}

// The subject of the certificate the server on `port` presents, as curl -v prints it.
std::string served_subject(uint16_t port, const std::string& ca_file) {
  const std::string where = "localhost:" + std::to_string(port);
  auto verbose =
      run_command({"curl", "-sS", "-v", "--max-time", "10", "--cacert", ca_file, "--resolve",
                   where + ":127.0.0.1", "-o", "/dev/null", "https://" + where + "/hello/again"},
                  20000);
  if (verbose.exit_code != 0) return "curl failed: " + verbose.output;
  const size_t at = verbose.output.find("subject: ");
  if (at == std::string::npos) return "no subject in: " + verbose.output;
  return verbose.output.substr(at + 9, verbose.output.find('\n', at) - at - 9);
}

TEST(ExampleServers, HttpsHelloTakesANewCertificateOnSighup) {
  if (!have_program("curl")) GTEST_SKIP() << "curl not installed (make test installs it)";
  namespace fs = std::filesystem;
  const TestPki& pki = TestPki::get();
  ScratchDir dir("ucp-https");
  const std::string certificate = dir.path() + "/cert.pem";
  const std::string key = dir.path() + "/key.pem";
  const auto install = [&](const IssuedCertificate& files) {
    fs::copy_file(files.certificate, certificate, fs::copy_options::overwrite_existing);
    fs::copy_file(files.private_key, key, fs::copy_options::overwrite_existing);
  };
  install(pki.ecdsa);  // ECDSA, CN=localhost
  ServerProcess server(
      example("https_hello", {"tls.certificate=" + certificate, "tls.private_key=" + key}));
  UCP_START_SERVER(server);
  EXPECT_EQ(served_subject(server.port(), pki.ca_file), "O=UCP tests; CN=localhost");

  install(pki.rsa);  // RSA, CN=rsa.test, also valid for localhost
  server.send_signal(SIGHUP);
  ASSERT_TRUE(server.wait_for_output("tls: certificate files read again", 15000))
      << server.output_tail();
  EXPECT_EQ(served_subject(server.port(), pki.ca_file), "O=UCP tests; CN=rsa.test");

  // A key that does not match the certificate: the reload is refused, the RSA pair stays.
  fs::copy_file(pki.ecdsa.private_key, key, fs::copy_options::overwrite_existing);
  server.send_signal(SIGHUP);
  ASSERT_TRUE(server.wait_for_output("keeping the running configuration", 15000))
      << server.output_tail();
  EXPECT_EQ(served_subject(server.port(), pki.ca_file), "O=UCP tests; CN=rsa.test");
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST(ExampleServers, UdpEchoRunsAsALoopService) {
  ServerProcess server(example("udp_echo"));
  UCP_START_SERVER(server);
  UniqueFd socket(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(socket);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string datagram = "one datagram";
  ASSERT_EQ(::sendto(socket.get(), datagram.data(), datagram.size(), 0,
                     reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(datagram.size()));
  pollfd readable{socket.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&readable, 1, 5000), 1) << "no echo within 5 s";
  char echoed[64];
  const ssize_t n = ::recv(socket.get(), echoed, sizeof echoed, 0);
  EXPECT_EQ(std::string(echoed, n > 0 ? static_cast<size_t>(n) : 0), datagram);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("stopped cleanly"), 1u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
