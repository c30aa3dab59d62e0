// [tls] in the binaries, end to end with real clients: bin/http_server over HTTPS (curl
// --cacert: files, POST /echo, a body larger than the send-file threshold, ALPN) and a plain
// HTTP client on the HTTPS port (400); bin/proactor_test's echo, http and websocket over TLS
// (Python's ssl module, curl); UCP's own WebSocket client on wss:// against bin/http_server;
// exit 2 naming the key and the file for a missing file or a key that does not match;
// bin/bench_client --tls.
// Certificates are made with `openssl req`, as a user would.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/tls/TlsContext.h"
#include "ucp/ws/WebSocket.h"

#include "Command.h"
#include "LoopRunner.h"
#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

namespace fs = std::filesystem;

/// A self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 in a scratch directory.
class SelfSigned {
 public:
  SelfSigned() {
    char name[] = "/tmp/ucp-tls-XXXXXX";
    dir_ = ::mkdtemp(name);
    made_ = run_command({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                         "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                         "-keyout", key(), "-out", certificate()},
                        20000)
                .exit_code == 0;
    std::ofstream(dir_ + "/root.txt") << "root";
    std::string big(200 * 1024 + 7, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i * 13 % 26);
    std::ofstream(dir_ + "/big.txt") << big;
    big_ = big;
  }
  ~SelfSigned() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  bool made() const { return made_; }
  std::string dir() const { return dir_; }
  std::string certificate() const { return dir_ + "/cert.pem"; }
  std::string key() const { return dir_ + "/key.pem"; }
  const std::string& big() const { return big_; }
  std::vector<std::string> tls_overrides() const {
    return {"tls.enable=true", "tls.certificate=" + certificate(), "tls.private_key=" + key()};
  }

 private:
  std::string dir_;
  std::string big_;
  bool made_ = false;
};

ServerProcess::Options http_server(const SelfSigned& files) {
  ServerProcess::Options options;
  options.binary = UCP_BIN_DIR "/http_server";
  options.overrides = files.tls_overrides();
  options.overrides.push_back("http.root=" + files.dir());
  return options;
}

std::string https_url(const ServerProcess& server, const std::string& path) {
  return "https://localhost:" + std::to_string(server.port()) + path;
}

CommandResult curl(const SelfSigned& files, std::vector<std::string> args) {
  std::vector<std::string> command = {"curl", "-sS",      "--max-time",
                                      "10",   "--cacert", files.certificate()};
  command.insert(command.end(), args.begin(), args.end());
  return run_command(command, 20000);
}

#define UCP_NEED(program) \
  if (!have_program(program)) GTEST_SKIP() << program " is not installed"

TEST(TlsBinaries, HttpServerServesHttpsToCurl) {
  UCP_NEED("openssl");
  UCP_NEED("curl");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  ServerProcess server(http_server(files));
  ASSERT_TRUE(server.start()) << server.error();
  const std::string resolve = "localhost:" + std::to_string(server.port()) + ":127.0.0.1";

  auto health = curl(files, {"--resolve", resolve, https_url(server, "/healthz")});
  EXPECT_EQ(health.exit_code, 0) << health.output;
  EXPECT_EQ(health.output, "ok");

  auto echo = curl(files, {"--resolve", resolve, "-H", "Content-Type: text/x-test", "--data",
                           "over TLS", https_url(server, "/echo")});
  EXPECT_EQ(echo.output, "over TLS");

  // Larger than the threshold above which plain HTTP sends files around the output queue.
  auto big = curl(files, {"--resolve", resolve, https_url(server, "/big.txt")});
  EXPECT_EQ(big.exit_code, 0) << big.output.substr(0, 300);
  EXPECT_TRUE(big.output == files.big()) << big.output.size() << " bytes";

  auto verbose =
      curl(files, {"--resolve", resolve, "-v", "-o", "/dev/null", https_url(server, "/root.txt")});
  EXPECT_NE(verbose.output.find("ALPN: server accepted http/1.1"), std::string::npos)
      << verbose.output;
  EXPECT_NE(verbose.output.find("TLSv1.3"), std::string::npos) << verbose.output;

  // The handshakes so far on /metrics (round-robin: worker 0 took the first connection).
  auto scrape = curl(files, {"--resolve", resolve, https_url(server, "/metrics")});
  const std::string ok = "\nucp_tls_handshakes_total{worker=\"0\",result=\"ok\"} ";
  const size_t at = scrape.output.find(ok);
  ASSERT_NE(at, std::string::npos) << scrape.output;
  EXPECT_GE(std::stoull(scrape.output.substr(at + ok.size())), 1u) << scrape.output;
  EXPECT_NE(scrape.output.find("\nucp_tls_resumed_total{worker=\"0\"} "), std::string::npos);
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST(TlsBinaries, PlainHttpOnTheHttpsPortGets400) {
  UCP_NEED("openssl");
  UCP_NEED("curl");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  ServerProcess server(http_server(files));
  ASSERT_TRUE(server.start()) << server.error();
  auto plain = run_command({"curl", "-sS", "--max-time", "10", "-w", " %{http_code}",
                            "http://127.0.0.1:" + std::to_string(server.port()) + "/healthz"},
                           20000);
  EXPECT_EQ(plain.output, "The plain HTTP request was sent to an HTTPS port.\r\n 400");
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// Python's ssl module as the client of proactor_test's three TCP protocols over TLS.
std::string python_tls_client(uint16_t port, const std::string& ca, const std::string& mode) {
  const std::string script = R"py(
import socket, ssl, sys, os, base64
port, ca, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
context = ssl.create_default_context(cafile=ca)
with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname="localhost") as s:
        def exact(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                if not chunk: raise SystemExit("closed early")
                data += chunk
            return data
        if mode == "echo":
            for size in (1, 1000, 70000):
                message = bytes((i * 7) % 251 for i in range(size))
                s.sendall(message)
                assert exact(size) == message, size
            print("echo ok", s.version())
        else:
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(("GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                       "\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head: head += exact(1)
            assert head.startswith(b"HTTP/1.1 101"), head
            mask = b"\x11\x22\x33\x44"
            payload = b"hello over wss"
            s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask +
                      bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
            frame = exact(2 + len(payload))
            assert frame[2:] == payload, frame
            print("websocket ok")
)py";
  auto result = run_command({"python3", "-c", script, std::to_string(port), ca, mode}, 30000);
  return result.output;
}

TEST(TlsBinaries, ProactorTestSpeaksEchoHttpAndWebSocketOverTls) {
  UCP_NEED("openssl");
  UCP_NEED("python3");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  for (const std::string protocol : {"echo", "http", "websocket"}) {
    auto overrides = files.tls_overrides();
    overrides.push_back("server.protocol=" + protocol);
    ServerProcess server(overrides);
    ASSERT_TRUE(server.start()) << server.error();
    if (protocol == "echo") {
      EXPECT_EQ(python_tls_client(server.port(), files.certificate(), "echo"), "echo ok TLSv1.3\n");
    } else if (protocol == "http") {
      if (!have_program("curl")) continue;
      auto hello = run_command(
          {"curl", "-sS", "--max-time", "10", "--cacert", files.certificate(), "--resolve",
           "localhost:" + std::to_string(server.port()) + ":127.0.0.1", https_url(server, "/")},
          20000);
      EXPECT_EQ(hello.output, "Hello, World!");
    } else {
      EXPECT_EQ(python_tls_client(server.port(), files.certificate(), "websocket"),
                "websocket ok\n");
    }
    EXPECT_TRUE(server.stop(SIGTERM).clean()) << protocol << ": " << server.output_tail();
  }
}

TEST(TlsBinaries, OurWebSocketClientSpeaksWssToHttpServer) {
  UCP_NEED("openssl");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  ServerProcess server(http_server(files));
  ASSERT_TRUE(server.start()) << server.error();
  tls::TlsClientOptions trust;
  trust.ca_file = files.certificate();  // self-signed: its own trust anchor
  auto context = tls::TlsContext::client(trust);
  ASSERT_TRUE(context) << context.error().message;
  ClientOptions tcp;
  tcp.tls = *context;
  tcp.family = AF_INET;  // the server listens on 127.0.0.1; "localhost" is the name verified
  auto loop = make_loop(64);
  ASSERT_TRUE(loop);
  std::string echoed;
  run_to_end(
      *loop, [](EventLoop& l, std::string url, ClientOptions options, std::string& out) -> Task<> {
        auto ws = co_await ws::WebSocket::connect(l, std::move(url), {}, options);
        EXPECT_TRUE(ws) << ws.error().message();
        if (!ws) co_return;
        EXPECT_TRUE(co_await (*ws)->send_text("hello over wss"));
        auto message = co_await (*ws)->receive();
        EXPECT_TRUE(message) << message.error().message();
        if (message) out = std::string(message->text());
        EXPECT_TRUE(co_await (*ws)->close(1000, "done"));
      }(*loop, "wss://localhost:" + std::to_string(server.port()) + "/ws/echo", tcp, echoed));
  EXPECT_EQ(echoed, "hello over wss");
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

// bench_client --tls, the HTTPS load of scripts/bench-tls.sh: every connection handshakes (the
// server counts them), every keep-alive GET is answered 200, no error.
TEST(TlsBinaries, BenchClientDrivesHttpsKeepAliveWithTls) {
  UCP_NEED("openssl");
  UCP_NEED("curl");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  ServerProcess server(http_server(files));
  ASSERT_TRUE(server.start()) << server.error();
  auto load = run_command(
      {UCP_BIN_DIR "/bench_client", "-h", "127.0.0.1", "-p", std::to_string(server.port()), "-c",
       "4", "-d", "1", "--tls", "--http", "/healthz", "--json"},
      60000);
  EXPECT_EQ(load.exit_code, 0) << load.output;
  EXPECT_NE(load.output.find("\"errors\":0,"), std::string::npos) << load.output;
  const std::string requests = "\"requests\":";
  const size_t at = load.output.find(requests);
  ASSERT_NE(at, std::string::npos) << load.output;
  EXPECT_GT(std::stoull(load.output.substr(at + requests.size())), 0u) << load.output;

  const std::string resolve = "localhost:" + std::to_string(server.port()) + ":127.0.0.1";
  auto scrape = curl(files, {"--resolve", resolve, https_url(server, "/metrics")});
  const std::string ok = "\nucp_tls_handshakes_total{worker=\"0\",result=\"ok\"} ";
  const size_t count = scrape.output.find(ok);
  ASSERT_NE(count, std::string::npos) << scrape.output;
  EXPECT_GE(std::stoull(scrape.output.substr(count + ok.size())), 4u) << scrape.output;
  EXPECT_TRUE(server.stop(SIGTERM).clean()) << server.output_tail();
}

TEST(TlsBinaries, AMissingFileOrAMismatchedKeyIsExitTwoNamingKeyAndFile) {
  UCP_NEED("openssl");
  SelfSigned files;
  ASSERT_TRUE(files.made());
  SelfSigned other;
  ASSERT_TRUE(other.made());
  const std::string binary = UCP_BIN_DIR "/http_server";
  const std::string config = UCP_SOURCE_DIR "/config/ucp.conf";
  auto missing = run_command(
      {binary, config, "--set", "tls.enable=true", "--set",
       "tls.certificate=" + files.dir() + "/nope.pem", "--set", "tls.private_key=" + files.key()},
      20000);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("tls.certificate: certificate file " + files.dir() +
                                "/nope.pem: No such file or directory"),
            std::string::npos)
      << missing.output;
  auto mismatched = run_command(
      {binary, config, "--set", "tls.enable=true", "--set",
       "tls.certificate=" + files.certificate(), "--set", "tls.private_key=" + other.key()},
      20000);
  EXPECT_EQ(mismatched.exit_code, 2) << mismatched.output;
  EXPECT_NE(mismatched.output.find("tls.private_key: private key file " + other.key() +
                                   " does not match certificate file " + files.certificate()),
            std::string::npos)
      << mismatched.output;
}

}  // namespace
}  // namespace ucp::test
