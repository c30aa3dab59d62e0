#include "ucp/net/SocketActivation.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ucp/net/InetAddress.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpServer.h"

#include "Backends.h"
#include "ErrorText.h"

namespace ucp {
namespace {

// Puts the variables a service manager sets, for this process (or another pid).
void set_environment(const std::string& pid, const std::string& count) {
  ::setenv("LISTEN_PID", pid.c_str(), 1);
  ::setenv("LISTEN_FDS", count.c_str(), 1);
  ::setenv("LISTEN_FDNAMES", "ucp", 1);
}

bool environment_cleared() {
  return std::getenv("LISTEN_PID") == nullptr && std::getenv("LISTEN_FDS") == nullptr &&
         std::getenv("LISTEN_FDNAMES") == nullptr;
}

// Moves whatever the test runner has at fd 3 out of the way for one test, and puts it back.
class FdThree {
 public:
  FdThree() : saved_(::fcntl(kFirstInheritedFd, F_DUPFD_CLOEXEC, 64)) {
    if (saved_ >= 0) ::close(kFirstInheritedFd);
  }
  ~FdThree() {
    if (saved_ >= 0) {
      ::dup2(saved_, kFirstInheritedFd);
      ::close(saved_);
    } else {
      ::close(kFirstInheritedFd);
    }
  }
  /// Places `fd` at 3 without close-on-exec, as a service manager leaves it.
  void place(int fd) const {
    if (fd == kFirstInheritedFd) {  // the lowest free fd was 3 already
      ASSERT_EQ(::fcntl(fd, F_SETFD, 0), 0);
      return;
    }
    ASSERT_EQ(::dup2(fd, kFirstInheritedFd), kFirstInheritedFd);
    ::close(fd);
  }

 private:
  int saved_;
};

UniqueFd loopback_listener() {
  auto address = InetAddress::parse("127.0.0.1", 0);
  auto listening = listen_on(*address, ListenOptions{});
  return listening ? std::move(*listening) : UniqueFd{};
}

TEST(SocketActivation, NoVariablesMeanNoSockets) {
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  auto fds = take_inherited_listen_fds();
  ASSERT_TRUE(fds);
  EXPECT_TRUE(fds->empty());
}

TEST(SocketActivation, SocketsForAnotherProcessAreLeftAloneAndTheVariablesCleared) {
  FdThree slot;
  auto listener = loopback_listener();
  ASSERT_TRUE(listener);
  slot.place(listener.release());
  set_environment(std::to_string(::getpid() + 1), "1");
  auto fds = take_inherited_listen_fds();
  ASSERT_TRUE(fds);
  EXPECT_TRUE(fds->empty());
  EXPECT_TRUE(environment_cleared());
  EXPECT_EQ(::fcntl(kFirstInheritedFd, F_GETFD) & FD_CLOEXEC, 0) << "not ours: untouched";
}

TEST(SocketActivation, TakesTheListeningSocketAtFdThree) {
  FdThree slot;
  auto listener = loopback_listener();
  ASSERT_TRUE(listener);
  const uint16_t port = InetAddress::local_of(listener.get())->port();
  slot.place(listener.release());
  set_environment(std::to_string(::getpid()), "1");

  auto fds = take_inherited_listen_fds();
  ASSERT_TRUE(fds) << fds.error().message();
  ASSERT_EQ(fds->size(), 1u);
  EXPECT_EQ((*fds)[0].get(), kFirstInheritedFd);
  EXPECT_NE(::fcntl(kFirstInheritedFd, F_GETFD) & FD_CLOEXEC, 0) << "children must not inherit it";
  EXPECT_TRUE(environment_cleared());
  EXPECT_TRUE(check_listening_tcp_socket((*fds)[0].get()));
  EXPECT_EQ(InetAddress::local_of((*fds)[0].get())->port(), port);
  (*fds)[0].release();  // FdThree closes fd 3
}

TEST(SocketActivation, MalformedVariablesAreErrors) {
  for (const auto& [pid, count] : std::vector<std::pair<std::string, std::string>>{
           {"12x", "1"}, {"", "1"}, {"-5", "1"}, {"self", "1"}}) {
    set_environment(pid, count);
    auto fds = take_inherited_listen_fds();
    ASSERT_FALSE(fds) << "LISTEN_PID=" << pid;
    EXPECT_EQ(fds.error(), std::errc::invalid_argument);
    EXPECT_TRUE(environment_cleared());
  }
  for (const char* count : {"0", "-1", "one", "1 ", "99999999999"}) {
    set_environment(std::to_string(::getpid()), count);
    auto fds = take_inherited_listen_fds();
    ASSERT_FALSE(fds) << "LISTEN_FDS=" << count;
    EXPECT_EQ(fds.error(), std::errc::invalid_argument);
  }
}

TEST(SocketActivation, AClosedFdIsAnErrorAndNothingIsTaken) {
  FdThree slot;  // fd 3 is closed now
  set_environment(std::to_string(::getpid()), "1");
  auto fds = take_inherited_listen_fds();
  ASSERT_FALSE(fds);
  EXPECT_EQ(fds.error(), std::errc::bad_file_descriptor);
}

TEST(SocketActivation, OnlyListeningTcpSocketsPassTheCheck) {
  auto listener = loopback_listener();
  ASSERT_TRUE(listener);
  EXPECT_TRUE(check_listening_tcp_socket(listener.get()));

  UniqueFd unbound(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto not_listening = check_listening_tcp_socket(unbound.get());
  ASSERT_FALSE(not_listening);
  EXPECT_EQ(not_listening.error(), std::errc::invalid_argument);

  UniqueFd datagram(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  auto udp = check_listening_tcp_socket(datagram.get());
  ASSERT_FALSE(udp);
  EXPECT_EQ(udp.error(), std::errc::wrong_protocol_type);

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  auto pipe_check = check_listening_tcp_socket(read_end.get());
  ASSERT_FALSE(pipe_check);
  EXPECT_EQ(pipe_check.error(), std::errc::not_a_socket);

  UniqueFd local(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto unix_socket = check_listening_tcp_socket(local.get());
  ASSERT_FALSE(unix_socket);
  EXPECT_EQ(unix_socket.error(), std::errc::address_family_not_supported);
}

Task<> echo(TcpConnection& connection) {
  std::array<std::byte, 1024> buffer;
  for (;;) {
    auto n = co_await connection.read(buffer);
    if (!n || *n == 0) co_return;
    if (!co_await connection.write_all(std::span(buffer.data(), *n))) co_return;
  }
}

ServerOptions adopting(int fd) {
  ServerOptions options;
  options.ip = "not an address: unused when a socket is adopted";
  options.port = 1;
  options.thread_num = 1;
  options.shutdown_timeout_ms = 2000;
  options.listen_fds = {fd};
  return options;
}

LoopOptions small_loop() {
  LoopOptions loop;
  loop.backend = test::backend_under_test();
  loop.ring_entries = 64;
  return loop;
}

// One round trip through a blocking client with a receive timeout (the wait is bounded).
std::string round_trip(uint16_t port, const std::string& message) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return {};
  timeval timeout{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (::send(fd.get(), message.data(), message.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(message.size())) {
    return {};
  }
  std::string reply;
  char buffer[256];
  while (reply.size() < message.size()) {
    ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  return reply;
}

TEST(TcpServerListenFd, AcceptsOnTheAdoptedSocketInsteadOfBinding) {
  auto listener = loopback_listener();
  ASSERT_TRUE(listener);
  const uint16_t port = InetAddress::local_of(listener.get())->port();
  TcpServer server(adopting(listener.release()), small_loop(), echo);
  ASSERT_EQ(test::error_text(server.start()), "");
  EXPECT_EQ(server.local_address().port(), port);
  std::thread runner([&server] { server.run(); });
  EXPECT_EQ(round_trip(port, "adopted"), "adopted");
  server.stop();
  runner.join();
}

TEST(TcpServerListenFd, RefusesASocketThatIsNotListeningAndClosesIt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  {
    TcpServer server(adopting(fd), small_loop(), echo);
    const std::string error = test::error_text(server.start());
    EXPECT_NE(error.find("is not a listening TCP socket"), std::string::npos) << error;
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the server owned the fd and closed it";
}

}  // namespace
}  // namespace ucp
