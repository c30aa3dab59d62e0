// The takeover protocol in one process: a TakeoverListener on a loop hands a real listening
// socket (or hundreds) to a TakeoverClient over a unix socket, refuses when told to, survives
// a successor that gives up, and frees the path for the next one. Both backends.

#include "Takeover.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ucp/net/InetAddress.h"
#include "ucp/net/Socket.h"

#include "LoopThread.h"

namespace ucp::app {
namespace {

using namespace std::chrono_literals;

UniqueFd listening_socket() {
  auto fd = listen_on(*InetAddress::parse("127.0.0.1", 0), ListenOptions{});
  return fd ? std::move(*fd) : UniqueFd();
}

uint16_t port_of(int fd) {
  auto local = InetAddress::local_of(fd);
  return local ? local->port() : 0;
}

std::string abstract_name(const std::string& what) {
  return "@ucp-takeover-test-" + std::to_string(::getpid()) + "-" + what;
}

/// A listener serving on a loop thread until a successor takes over (or the test ends).
class Serving {
 public:
  Serving(const std::string& path, std::vector<int> sockets, std::string refusal = {})
      : sockets_(std::move(sockets)), refusal_(std::move(refusal)) {
    auto listener = TakeoverListener::listen(loop_.loop(), path);
    if (!listener) {
      error_ = listener.error().message;
      return;
    }
    listener_ = std::move(*listener);
    TakeoverListener::Handover handover;
    handover.sockets = [this] { return sockets_; };
    handover.refusal = [this] { return refusal_; };
    handover.handed_over = [this](pid_t successor) { successor_ = successor; };
    loop_.start(listener_->serve(std::move(handover)));
  }
  ~Serving() {
    loop_.stop_and_join();
    listener_.reset();
  }
  const std::string& error() const { return error_; }
  /// The pid that took over, once one has (bounded wait).
  pid_t wait_for_successor() {
    for (int i = 0; i < 5000 && successor_.load() == 0; ++i) std::this_thread::sleep_for(1ms);
    return successor_.load();
  }
  pid_t successor() const { return successor_.load(); }

 private:
  test::LoopThread loop_;
  std::vector<int> sockets_;
  std::string refusal_;
  std::unique_ptr<TakeoverListener> listener_;
  std::atomic<pid_t> successor_{0};
  std::string error_;
};

TEST(Takeover, TheSuccessorGetsTheListeningSocketAndTheOldServerHearsOfIt) {
  UniqueFd socket = listening_socket();
  ASSERT_TRUE(socket);
  const std::string path = abstract_name("one");
  Serving old_server(path, {socket.get()});
  ASSERT_EQ(old_server.error(), "");
  auto client = TakeoverClient::connect(path, "Takeover_test");
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_EQ(client->old_pid(), ::getpid());
  ASSERT_EQ(client->sockets().size(), 1u);
  // The same socket, under another fd: it listens on the same port.
  EXPECT_NE(client->sockets()[0].get(), socket.get());
  EXPECT_EQ(port_of(client->sockets()[0].get()), port_of(socket.get()));
  EXPECT_EQ(old_server.successor(), 0);  // nothing until the successor serves
  auto confirmed = client->confirm();
  EXPECT_TRUE(confirmed) << confirmed.error().message;
  EXPECT_EQ(old_server.wait_for_successor(), ::getpid());
  // Once handed over, nobody waits at the path any more: the successor listens there next.
  auto again = TakeoverClient::connect(path, "Takeover_test");
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("no server waits there"), std::string::npos)
      << again.error().message;
  auto loop = test::make_loop();
  auto successor = TakeoverListener::listen(*loop, path);
  EXPECT_TRUE(successor) << successor.error().message;
}

TEST(Takeover, ManySocketsGoInSeveralMessages) {
  std::vector<UniqueFd> sockets;
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {
    sockets.push_back(listening_socket());
    ASSERT_TRUE(sockets.back());
    fds.push_back(sockets.back().get());
  }
  const std::string path = abstract_name("many");
  Serving old_server(path, fds);
  auto client = TakeoverClient::connect(path, "Takeover_test");
  ASSERT_TRUE(client) << client.error().message;
  ASSERT_EQ(client->sockets().size(), 300u);
  for (size_t i = 0; i < fds.size(); ++i) {
    EXPECT_EQ(port_of(client->sockets()[i].get()), port_of(fds[i])) << i;
  }
}

TEST(Takeover, ARefusalIsReportedToTheSuccessor) {
  UniqueFd socket = listening_socket();
  const std::string path = abstract_name("refuses");
  Serving old_server(path, {socket.get()}, "it is stopping");
  auto client = TakeoverClient::connect(path, "Takeover_test");
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().message, "the running server refused: it is stopping");
  Serving nothing_to_give(abstract_name("empty"), {});
  auto empty = TakeoverClient::connect(abstract_name("empty"), "Takeover_test");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message,
            "the running server refused: this server has no listening socket to hand over");
}

TEST(Takeover, ASuccessorThatGivesUpLeavesTheOldServerInCharge) {
  UniqueFd socket = listening_socket();
  const std::string path = abstract_name("gives-up");
  Serving old_server(path, {socket.get()});
  {
    auto quitter = TakeoverClient::connect(path, "Takeover_test");
    ASSERT_TRUE(quitter) << quitter.error().message;
  }  // closed without confirm(): its start-up failed
  auto next = TakeoverClient::connect(path, "Takeover_test");
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_TRUE(next->confirm());
  EXPECT_EQ(old_server.wait_for_successor(), ::getpid());
}

TEST(Takeover, APathIsReplacedWhenStaleAndRefusedWhenAServerWaitsThere) {
  const std::string dir = ::testing::TempDir() + "takeover-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/takeover.sock";
  UniqueFd socket = listening_socket();
  {
    Serving first(path, {socket.get()});
    ASSERT_EQ(first.error(), "");
    EXPECT_TRUE(std::filesystem::is_socket(path));
    auto loop = test::make_loop();
    auto second = TakeoverListener::listen(*loop, path);
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message.find("a running server waits there"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "close() removes the path";
  // A socket file nobody listens on (a server that was killed) is replaced.
  {
    UniqueFd stale(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
    ASSERT_EQ(::bind(stale.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  ASSERT_TRUE(std::filesystem::is_socket(path));
  Serving replacing(path, {socket.get()});
  EXPECT_EQ(replacing.error(), "");
  auto client = TakeoverClient::connect(path, "Takeover_test");
  EXPECT_TRUE(client) << client.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ucp::app
