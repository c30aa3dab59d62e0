// The engine against OpenSSL's own tools over loopback TCP: `openssl s_client` against a
// server session, and a client session against `openssl s_server`, each session driven by
// a small blocking loop (poll, recv, send) such as a connection layer would run.

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ucp/base/UniqueFd.h"
#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"
#include "ucp/tls/TlsSessionCache.h"

#include "Command.h"
#include "TestCertificates.h"
#include "TlsLink.h"

namespace ucp::tls {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWaitMs = 10000;  // every wait below is bounded by this

const test::TestPki& pki() { return test::TestPki::get(); }

// A child process with its stdin and its stdout+stderr on pipes, stopped by its PID.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = UniqueFd(in[1]);
    stdout_ = UniqueFd(out[0]);
    ::fcntl(stdout_.get(), F_SETFL, O_NONBLOCK);
  }
  ~Child() { stop(); }

  void write_stdin(const std::string& text) {
    if (::write(stdin_.get(), text.data(), text.size()) < 0) ADD_FAILURE() << "stdin write";
  }
  void close_stdin() { stdin_ = UniqueFd(); }
  /// Reads output until it contains `text` or the deadline passes.
  bool wait_for(const std::string& text) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (output_.find(text) == std::string::npos && Clock::now() < deadline) {
      pollfd p{stdout_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(stdout_.get(), buffer, sizeof buffer);
      if (n <= 0) break;
      output_.append(buffer, static_cast<size_t>(n));
    }
    return output_.find(text) != std::string::npos;
  }
  /// Waits (bounded) for the exit; kills it by its PID if it is still running then.
  int stop() {
    if (pid_ <= 0) return exit_code_;
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      wait_for("\x01never");  // drain output meanwhile, 50 ms at a time
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  UniqueFd stdin_, stdout_;
  std::string output_;
};

// ---- a blocking transport for one session -----------------------------------------------

bool wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, kWaitMs) == 1;
}

bool send_output(int fd, TlsSession& session) {
  iovec buffers[16];
  while (session.has_output()) {
    const size_t count = session.gather_output(buffers);
    msghdr message{};
    message.msg_iov = buffers;
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n <= 0) return false;
    session.consume_output(static_cast<size_t>(n));
  }
  return true;
}

// Receives into `buffer`; the bytes a call does not consume are kept by the session.
// Returns false on EOF (after telling the session) or a socket error.
bool receive(int fd, TlsSession& session, std::string& buffer) {
  if (!wait_readable(fd)) return false;
  buffer.resize(16384);
  const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
  if (n == 0) session.peer_eof();
  buffer.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return n > 0;
}

std::error_code run_handshake(int fd, TlsSession& session) {
  std::string received;
  for (int round = 0; round < 64; ++round) {
    auto step = session.handshake(test::as_bytes(received));
    if (!send_output(fd, session)) return std::make_error_code(std::errc::broken_pipe);
    if (!step) return step.error();
    session.keep(test::as_bytes(received).subspan(step->consumed));
    if (step->established) return {};
    receive(fd, session, received);
  }
  return std::make_error_code(std::errc::timed_out);
}

// Reads plaintext until `until` arrives, the peer closes, or an error.
std::string read_until(int fd, TlsSession& session, const std::string& until,
                       std::error_code& error, bool& peer_closed) {
  std::string text;
  std::string received;
  std::byte plaintext[4096];
  for (int round = 0; round < 256 && text.find(until) == std::string::npos; ++round) {
    auto step = session.read(test::as_bytes(received), plaintext);
    send_output(fd, session);  // alerts, key updates
    if (!step) {
      error = step.error();
      break;
    }
    text.append(reinterpret_cast<const char*>(plaintext), step->plaintext);
    session.keep(test::as_bytes(received).subspan(step->consumed));
    received.clear();
    peer_closed = step->peer_closed;
    if (step->peer_closed) break;
    if (step->plaintext == 0 && !receive(fd, session, received) && received.empty()) {
      // EOF or nothing within the wait: one more read reports truncation.
      auto end = session.read({}, plaintext);
      if (!end) error = end.error();
      break;
    }
  }
  return text;
}

UniqueFd loopback_listener(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(::listen(fd.get(), 4), 0);
  EXPECT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  port = ntohs(address.sin_port);
  return fd;
}

UniqueFd connect_loopback(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return UniqueFd();
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

struct ServedConnection {
  std::error_code handshake;
  std::string version, alpn, server_name, request;
  std::error_code read_error;
  bool peer_closed = false;
};

// One connection on `listener`: handshake, read a line, answer it, close with close_notify
// and wait for the peer's.
ServedConnection serve_one(int listener, const TlsContext& context) {
  ServedConnection served;
  if (!wait_readable(listener)) {
    served.handshake = std::make_error_code(std::errc::timed_out);
    return served;
  }
  UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto session = TlsSession::accept(context);
  served.handshake = run_handshake(fd.get(), *session);
  if (served.handshake) return served;
  served.version = session->version();
  served.alpn = session->alpn();
  served.server_name = session->server_name();
  served.request = read_until(fd.get(), *session, "\n", served.read_error, served.peer_closed);
  if (!session->write(test::as_bytes("pong from ucp\n"))) return served;
  session->close();
  send_output(fd.get(), *session);
  bool closed = false;
  read_until(fd.get(), *session, "\x01never", served.read_error, closed);
  served.peer_closed = closed;
  return served;
}

class OpenSslClient : public ::testing::TestWithParam<const char*> {};

TEST_P(OpenSslClient, TalksToTheEngineServer) {
  if (!test::have_program("openssl")) GTEST_SKIP() << "openssl (the command) is not installed";
  TlsOptions options;
  options.certificates = {{pki().ecdsa.certificate, pki().ecdsa.private_key}};
  auto context = TlsContext::server(options);
  ASSERT_TRUE(context);
  uint16_t port = 0;
  UniqueFd listener = loopback_listener(port);
  ServedConnection served;
  std::thread server([&] { served = serve_one(listener.get(), **context); });

  Child client({"openssl", "s_client", "-connect", "127.0.0.1:" + std::to_string(port),
                "-servername", "example.test", "-alpn", "http/1.1", "-CAfile", pki().ca_file,
                "-verify_return_error", "-verify_hostname", "example.test", GetParam(),
                "-ign_eof"});
  client.write_stdin("ping from s_client\n");
  const bool answered = client.wait_for("pong from ucp");
  client.close_stdin();
  const int exit_code = client.stop();
  server.join();

  EXPECT_TRUE(answered) << client.output();
  EXPECT_FALSE(served.handshake) << served.handshake.message();
  EXPECT_EQ(served.version, std::string(GetParam()) == "-tls1_2" ? "TLSv1.2" : "TLSv1.3");
  EXPECT_EQ(served.alpn, "http/1.1");
  EXPECT_EQ(served.server_name, "example.test");
  EXPECT_EQ(served.request, "ping from s_client\n");
  EXPECT_TRUE(served.peer_closed || !served.read_error) << served.read_error.message();
  EXPECT_NE(client.output().find("Verify return code: 0 (ok)"), std::string::npos)
      << client.output();
  EXPECT_NE(client.output().find("ALPN protocol: http/1.1"), std::string::npos);
  EXPECT_EQ(exit_code, 0) << client.output();
}

INSTANTIATE_TEST_SUITE_P(Versions, OpenSslClient, ::testing::Values("-tls1_2", "-tls1_3"),
                         [](const ::testing::TestParamInfo<const char*>& version) {
                           return std::string(version.param) == "-tls1_2" ? "Tls12" : "Tls13";
                         });

TEST(OpenSslServer, TheEngineClientVerifiesAndResumesAcrossReconnects) {
  if (!test::have_program("openssl")) GTEST_SKIP() << "openssl (the command) is not installed";
  Child server({"openssl", "s_server", "-accept", "127.0.0.1:0", "-naccept", "2", "-cert",
                pki().ecdsa.certificate, "-key", pki().ecdsa.private_key, "-alpn", "http/1.1",
                "-rev"});
  ASSERT_TRUE(server.wait_for("ACCEPT")) << server.output();
  ASSERT_TRUE(server.wait_for("\n"));
  const auto at = server.output().find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << server.output();
  const auto port = static_cast<uint16_t>(std::stoi(server.output().substr(at + 10)));

  TlsClientOptions options;
  options.ca_file = pki().ca_file;
  options.alpn = {"h2", "http/1.1"};
  auto context = TlsContext::client(options);
  ASSERT_TRUE(context);
  TlsSessionCache cache;
  for (int connection = 0; connection < 2; ++connection) {
    SCOPED_TRACE(connection == 0 ? "first connection" : "reconnect");
    UniqueFd fd = connect_loopback(port);
    ASSERT_TRUE(fd);
    auto session = TlsSession::connect(**context, "localhost", &cache);
    ASSERT_TRUE(session);
    auto handshake = run_handshake(fd.get(), *session);
    ASSERT_FALSE(handshake) << handshake.message();
    EXPECT_EQ(session->alpn(), "http/1.1");
    EXPECT_EQ(session->resumed(), connection == 1);
    ASSERT_TRUE(session->write(test::as_bytes("ping\n")));
    ASSERT_TRUE(send_output(fd.get(), *session));
    std::error_code error;
    bool peer_closed = false;
    EXPECT_EQ(read_until(fd.get(), *session, "\n", error, peer_closed), "gnip\n")
        << error.message();
    session->close();
    send_output(fd.get(), *session);
  }
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(server.stop(), 0) << server.output();
}

}  // namespace
}  // namespace ucp::tls
