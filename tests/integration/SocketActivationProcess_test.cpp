// bin/proactor_test started the way systemd starts a socket-activated service: the test opens
// the listening socket, the child gets it as fd 3 with LISTEN_FDS=1 and LISTEN_PID = its own
// pid, and the server must accept on it instead of binding its configured port.

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "LoopbackClient.h"
#include "ServerProcess.h"

namespace ucp::test {
namespace {

// A listening socket on 127.0.0.1 and a free port, as a .socket unit would open it.
UniqueFd listening_socket(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(fd.get(), 128) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return UniqueFd{};
  }
  port = ntohs(address.sin_port);
  return fd;
}

void expect_echo(uint16_t port, std::string_view message) {
  auto connection = connect_loopback(port);
  ASSERT_TRUE(connection) << connection.error().message();
  std::string scratch(message.size(), '\0');
  auto echoed = echo_round_trip(connection->get(), message, scratch);
  EXPECT_TRUE(echoed) << echoed.error().message();
}

TEST(SocketActivationProcess, ServerAcceptsOnTheSocketAtFdThree) {
  uint16_t port = 0;
  UniqueFd socket = listening_socket(port);
  ASSERT_TRUE(socket);
  ServerProcess::Options options;
  // The configured address would be refused if the server tried to bind it: it must not.
  options.overrides = {"server.ip=192.0.2.1", "server.port=1"};
  options.listen_fd = socket.get();
  ServerProcess server(options);
  UCP_START_SERVER(server);

  EXPECT_EQ(server.port(), port) << server.output_tail();
  EXPECT_EQ(server.count_output_lines("(socket passed by the service manager)"), 1u)
      << server.output_tail();
  expect_echo(port, "socket activation\n");
  // Our copy is the same socket: closing it does not close the server's.
  socket.reset();
  expect_echo(port, "still listening\n");
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(SocketActivationProcess, SocketsForAnotherProcessAreIgnored) {
  uint16_t port = 0;
  UniqueFd socket = listening_socket(port);
  ASSERT_TRUE(socket);
  ServerProcess::Options options;  // port 0 from ServerProcess: the server binds its own
  options.listen_fd = socket.get();
  options.listen_pid_is_child = false;
  ServerProcess server(options);
  UCP_START_SERVER(server);

  EXPECT_NE(server.port(), port);
  EXPECT_EQ(server.count_output_lines("service manager"), 0u) << server.output_tail();
  expect_echo(server.port(), "bound its own port\n");
  EXPECT_EQ(server.stop(SIGTERM).describe(), "exit 0") << server.output_tail();
}

TEST(SocketActivationProcess, ASocketThatIsNotListeningIsAStartUpFailure) {
  UniqueFd unbound(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(unbound);
  ServerProcess::Options options;
  options.listen_fd = unbound.get();
  ServerProcess server(options);
  if (!server.binary_exists()) GTEST_SKIP() << "proactor_test not built: " UCP_BIN_DIR;
  EXPECT_FALSE(server.start());
  auto status = server.wait_exit(10000);
  ASSERT_TRUE(status) << server.output_tail();
  EXPECT_EQ(status->describe(), "exit 1") << server.output_tail();
  EXPECT_GE(server.count_output_lines("is not a listening TCP socket"), 1u) << server.output_tail();
}

}  // namespace
}  // namespace ucp::test
