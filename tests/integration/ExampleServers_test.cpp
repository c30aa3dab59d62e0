// The server examples run on the application runtime: each takes the generated config file
// (loopback, port 0), says where it listens, serves, and stops cleanly on SIGTERM (exit 0).
// example_udp_echo is a LoopService: one loop, one coroutine, the runtime's signals.
// example_https_hello serves HTTPS with a CA-signed certificate to curl --cacert.

#include <csignal>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "Command.h"
#include "HttpClient.h"
#include "LoopbackClient.h"
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

TEST(ExampleServers, HttpsHelloServesCurlOverTls) {
  if (!have_program("curl")) GTEST_SKIP() << "curl not installed (make test installs it)";
  const TestPki& pki = TestPki::get();  // a leaf for localhost and 127.0.0.1, signed by a CA
  ServerProcess server(example("https_hello", {"tls.certificate=" + pki.ecdsa.certificate,
                                               "tls.private_key=" + pki.ecdsa.private_key}));
  UCP_START_SERVER(server);
  const std::string port = std::to_string(server.port());
  auto fetched = run_command(
      {"curl", "-sS", "--max-time", "10", "--cacert", pki.ca_file, "--resolve",
       "localhost:" + port + ":127.0.0.1", "https://localhost:" + port + "/hello/world"},
      20000);
  ASSERT_EQ(fetched.exit_code, 0) << fetched.output;
  // The handler's line from Request::tls(): version, cipher (the client's choice), ALPN.
  EXPECT_EQ(fetched.output.rfind("Hello, world!\nTLSv1.3 TLS_", 0), 0u) << fetched.output;
  EXPECT_TRUE(fetched.output.ends_with(" ALPN http/1.1\n")) << fetched.output;

  // A client that does not trust the CA is refused by its own verification.
  auto untrusted = run_command(
      {"curl", "-sS", "--max-time", "10", "--resolve", "localhost:" + port + ":127.0.0.1",
       "https://localhost:" + port + "/hello/world"},
      20000);
  EXPECT_EQ(untrusted.exit_code, 60) << untrusted.output;  // CURLE_PEER_FAILED_VERIFICATION
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
