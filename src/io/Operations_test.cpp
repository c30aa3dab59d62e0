// Every operation of io/detail/Operation.h over real fds, on both backends: each test runs on
// io_uring and on epoll and expects the same results (the Operations suite is parameterized by
// the backend). Loopback sockets, socketpairs, pipes and a temporary file; every wait bounded.

#include "ucp/io/Operations.h"

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucp/io/WithTimeout.h"
#include "ucp/io/detail/DatagramLayout.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/io/detail/MultishotAccept.h"
#include "ucp/io/detail/MultishotRecv.h"
#include "ucp/io/detail/MultishotRecvMsg.h"
#include "ucp/io/detail/RingMessage.h"
#include "ucp/io/detail/VectoredSend.h"

#include "Backends.h"
#include "LoopRunner.h"
#include "SocketPair.h"
#include "io/ReceiveBuffers.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

class Operations : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }

  std::unique_ptr<EventLoop> make_loop(LoopOptions options = {}) {
    options.backend = GetParam();
    auto loop = EventLoop::create(options);
    if (!loop) {
      ADD_FAILURE() << EventLoop::describe_setup_error(loop.error(), options);
      return nullptr;
    }
    EXPECT_EQ((*loop)->backend_kind(), GetParam());
    return std::move(*loop);
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, Operations, test::kAllBackends, test::backend_name);

// Any operation descriptor, awaited as it is filled in.
class RawOp : public detail::OperationAwaiter {
 public:
  explicit RawOp(EventLoop& loop) noexcept : OperationAwaiter(loop) {}
  detail::Operation& op() noexcept { return op_; }
  int32_t await_resume() const noexcept { return op_.result; }
};

struct StreamWait {
  detail::MultishotRecv& stream;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return stream.wait(caller); }
  void await_resume() const noexcept {}
};

using test::SocketPair;

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

uint16_t local_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

// A blocking socket of `type` bound to 127.0.0.1 on a free port (listening, for TCP).
UniqueFd bound_socket(int type, uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  sockaddr_in address = loopback(0);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  if (type == SOCK_STREAM) {
    EXPECT_EQ(::listen(fd.get(), 64), 0);
  }
  port = local_port(fd.get());
  return fd;
}

Task<> wait_until(EventLoop& loop, const bool& done) {
  for (int i = 0; i < 2000 && !done; ++i) co_await io::sleep_for(loop, 1ms);
}

TEST_P(Operations, AcceptAndConnectPairBlockingSockets) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  uint16_t port = 0;
  UniqueFd listener = bound_socket(SOCK_STREAM, port);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));  // blocking, as users make
  Result<io::Accepted> accepted = Unexpected{std::errc::io_error};
  Result<void> connected = Unexpected{std::errc::io_error};
  std::string echoed;
  test::run_to_end(
      *loop,
      [](EventLoop& l, int listen_fd, int client_fd, Result<io::Accepted>& a, Result<void>& c,
         std::string& out) -> Task<> {
        bool accept_done = false;
        l.spawn([](EventLoop& inner, int fd, Result<io::Accepted>& result, bool& done) -> Task<> {
          result = co_await io::accept(inner, fd);
          done = true;
        }(l, listen_fd, a, accept_done));
        sockaddr_in address = loopback(local_port(listen_fd));
        c = co_await io::connect(l, client_fd, reinterpret_cast<sockaddr*>(&address),
                                 sizeof address);
        co_await wait_until(l, accept_done);
        if (!a || !c) co_return;
        auto sent = co_await io::send(l, a->fd.get(), bytes_of("accepted"));
        EXPECT_TRUE(sent);
        std::array<std::byte, 32> buffer;
        auto n = co_await io::recv(l, client_fd, buffer, 5000);
        if (n) out = text_of(std::span(buffer.data(), *n));
      }(*loop, listener.get(), client.get(), accepted, connected, echoed));
  ASSERT_TRUE(connected) << connected.error().message();
  ASSERT_TRUE(accepted) << accepted.error().message();
  EXPECT_EQ(reinterpret_cast<const sockaddr_in&>(accepted->peer).sin_port,
            htons(local_port(client.get())));
  EXPECT_EQ(echoed, "accepted");
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST_P(Operations, ConnectToAPortNobodyListensOnIsRefused) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  uint16_t port = 0;
  UniqueFd taken(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));  // bound, never listening
  sockaddr_in address = loopback(0);
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  port = local_port(taken.get());
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  Result<void> connected;
  test::run_to_end(*loop, [](EventLoop& l, int fd, uint16_t p, Result<void>& out) -> Task<> {
    sockaddr_in target = loopback(p);
    out = co_await io::connect(l, fd, reinterpret_cast<sockaddr*>(&target), sizeof target);
  }(*loop, client.get(), port, connected));
  ASSERT_FALSE(connected);
  EXPECT_EQ(connected.error(), std::errc::connection_refused);
}

TEST_P(Operations, MultishotAcceptTakesEveryConnectionUntilCancelled) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  ASSERT_TRUE(loop->capabilities().multishot_accept);
  uint16_t port = 0;
  UniqueFd listener = bound_socket(SOCK_STREAM, port);
  detail::LoopAccess::attach(*loop, listener.get());  // as TcpServer does
  struct Acceptor : detail::MultishotAccept {
    Acceptor(EventLoop& l, int listening) noexcept
        : MultishotAccept(l, listening, hook<&Acceptor::take>) {}
    void take(int accepted_fd) noexcept { accepted.emplace_back(accepted_fd); }
    std::vector<UniqueFd> accepted;
  } acceptor(*loop, listener.get());
  std::vector<UniqueFd>& accepted = acceptor.accepted;
  Result<void> ended;
  constexpr size_t kClients = 5;
  std::vector<UniqueFd> clients;
  test::run_to_end(
      *loop,
      [](EventLoop& l, detail::MultishotAccept& a, std::vector<UniqueFd>& got,
         std::vector<UniqueFd>& mine, uint16_t p, Result<void>& end) -> Task<> {
        bool finished = false;
        l.spawn([](detail::MultishotAccept& multishot, Result<void>& result, bool& done) -> Task<> {
          result = co_await multishot;
          done = true;
        }(a, end, finished));
        for (size_t i = 0; i < kClients; ++i) {
          mine.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
          sockaddr_in target = loopback(p);
          auto c = co_await io::connect(l, mine.back().get(), reinterpret_cast<sockaddr*>(&target),
                                        sizeof target);
          EXPECT_TRUE(c);
        }
        for (int i = 0; i < 2000 && got.size() < kClients; ++i) co_await io::sleep_for(l, 1ms);
        a.cancel();
        co_await wait_until(l, finished);
      }(*loop, acceptor, accepted, clients, port, ended));
  EXPECT_EQ(accepted.size(), kClients);
  ASSERT_FALSE(ended);
  EXPECT_EQ(ended.error(), std::errc::operation_canceled);
  detail::LoopAccess::detach(*loop, listener.get());
  EXPECT_EQ(loop->in_flight(), 0u);
}

// A big pool, and a pool of two buffers that runs dry (the stream then falls back to one
// receive into a pool block): either way every byte arrives in order, the queue's pauses are
// invisible, EOF ends it and every buffer comes back.
TEST_P(Operations, MultishotReceiveDeliversEveryByteInOrderThenEof) {
  for (uint32_t buffers : {16u, 2u}) {
    SCOPED_TRACE(std::to_string(buffers) + " receive buffers");
    LoopOptions options;
    options.provided_buffers_count = buffers;
    options.provided_buffer_size = 64;
    auto loop = make_loop(options);
    ASSERT_TRUE(loop);
    ASSERT_TRUE(loop->capabilities().multishot_receive);
    SocketPair pair;
    detail::LoopAccess::attach(*loop, pair.b.get());
    std::string sent(5000, '\0');
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>('a' + i % 23);
    std::string received;
    bool eof = false;
    {
      detail::MultishotRecv stream(*loop, pair.b.get());
      test::run_to_end(*loop,
                       [](EventLoop& l, int writer, detail::MultishotRecv& s,
                          const std::string& data, std::string& out, bool& at_eof) -> Task<> {
                         io::SendAllOp send(l, writer, bytes_of(data));
                         EXPECT_TRUE(co_await send);
                         ::shutdown(writer, SHUT_WR);
                         std::array<std::byte, 100> chunk;
                         for (int rounds = 0; rounds < 10000; ++rounds) {
                           if (!s.has_data() && !s.at_eof() && s.error() == 0)
                             co_await StreamWait{s};
                           size_t n = s.copy_out(chunk);
                           out += text_of(std::span(chunk.data(), n));
                           if (!s.has_data() && (s.at_eof() || s.error() != 0)) break;
                         }
                         at_eof = s.at_eof();
                         EXPECT_EQ(s.error(), 0);
                         for (int i = 0; i < 1000 && s.busy(); ++i) co_await io::sleep_for(l, 1ms);
                       }(*loop, pair.a.get(), stream, sent, received, eof));
      EXPECT_FALSE(stream.busy());
    }
    EXPECT_TRUE(eof);
    EXPECT_EQ(received.size(), sent.size());
    EXPECT_TRUE(received == sent) << "bytes lost or reordered";
    EXPECT_EQ(detail::LoopAccess::receive_buffers(*loop)->held(), 0u);
    EXPECT_EQ(loop->in_flight(), 0u);
    detail::LoopAccess::detach(*loop, pair.b.get());
  }
}

TEST_P(Operations, ReadsAndWritesARegularFileAtOffsetsAndAtTheFilePosition) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  char path[] = "/tmp/ucp-file-XXXXXX";
  UniqueFd file(::mkstemp(path));
  ASSERT_TRUE(file);
  ::unlink(path);
  std::string at_offset, from_position;
  test::run_to_end(*loop,
                   [](EventLoop& l, int fd, std::string& first, std::string& second) -> Task<> {
                     auto written = co_await io::write(l, fd, bytes_of("hello, file"), 0);
                     EXPECT_TRUE(written);
                     if (written) {
                       EXPECT_EQ(*written, 11u);
                     }
                     std::array<std::byte, 64> buffer;
                     auto n = co_await io::read(l, fd, buffer, 7);
                     if (n) first = text_of(std::span(buffer.data(), *n));
                     ::lseek(fd, 0, SEEK_SET);
                     n = co_await io::read(l, fd, buffer);  // at the file position, which moves
                     if (n) second = text_of(std::span(buffer.data(), *n));
                   }(*loop, file.get(), at_offset, from_position));
  EXPECT_EQ(at_offset, "file");
  EXPECT_EQ(from_position, "hello, file");
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 11);
}

TEST_P(Operations, PipeReadWaitsForDataWhileTheLoopRunsTimers) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);  // blocking, as an application makes it
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  std::vector<std::string> order;
  test::run_to_end(*loop, [](EventLoop& l, int in, int out, std::vector<std::string>& o) -> Task<> {
    bool read_done = false;
    l.spawn([](EventLoop& inner, int fd, std::vector<std::string>& events, bool& done) -> Task<> {
      std::array<std::byte, 16> buffer;
      auto n = co_await io::read(inner, fd, buffer);
      events.push_back(n ? "read " + text_of(std::span(buffer.data(), *n)) : "read failed");
      done = true;
    }(l, in, o, read_done));
    co_await io::sleep_for(l, 20ms);
    o.push_back("timer");
    auto written = co_await io::write(l, out, bytes_of("pipe"));
    EXPECT_TRUE(written);
    co_await wait_until(l, read_done);
  }(*loop, read_end.get(), write_end.get(), order));
  EXPECT_EQ(order, (std::vector<std::string>{"timer", "read pipe"}));
}

TEST_P(Operations, CancelEndsAParkedReceiveAndLeavesACompletedOneAlone) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  Result<size_t> parked = size_t{0};
  Result<size_t> completed = Unexpected{std::errc::io_error};
  test::run_to_end(
      *loop,
      [](EventLoop& l, int a, int b, Result<size_t>& first, Result<size_t>& second) -> Task<> {
        io::RecvOp* handle = nullptr;
        bool done = false;
        l.spawn([](EventLoop& inner, int fd, io::RecvOp*& h, Result<size_t>& r, bool& d) -> Task<> {
          std::array<std::byte, 16> buffer;
          io::RecvOp op = io::recv(inner, fd, buffer);
          h = &op;
          r = co_await op;
          h = nullptr;
          d = true;
        }(l, b, handle, first, done));
        co_await io::sleep_for(l, 5ms);
        if (handle != nullptr) handle->cancel();
        co_await wait_until(l, done);
        // Completed before the cancel: the cancel changes nothing.
        EXPECT_EQ(::send(a, "z", 1, MSG_NOSIGNAL), 1);
        std::array<std::byte, 16> buffer;
        io::RecvOp op = io::recv(l, b, buffer);
        second = co_await op;
        op.cancel();
        co_await io::sleep_for(l, 1ms);
      }(*loop, pair.a.get(), pair.b.get(), parked, completed));
  ASSERT_FALSE(parked);
  EXPECT_EQ(parked.error(), std::errc::operation_canceled);
  ASSERT_TRUE(completed);
  EXPECT_EQ(*completed, 1u);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST_P(Operations, SendToAClosedPeerFailsWithEpipeNeverSigpipe) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  pair.b.reset();
  Result<size_t> sent = size_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int a, Result<size_t>& out) -> Task<> {
    out = co_await io::send(l, a, bytes_of("nobody there"));
  }(*loop, pair.a.get(), sent));
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error(), std::errc::broken_pipe);
}

TEST_P(Operations, CloseThroughTheLoopReleasesTheFd) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  const int fd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  Result<void> closed = Unexpected{std::errc::io_error};
  test::run_to_end(*loop, [](EventLoop& l, int f, Result<void>& out) -> Task<> {
    out = co_await io::close(l, f);
  }(*loop, fd, closed));
  EXPECT_TRUE(closed);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_P(Operations, DatagramsKeepTheirBoundariesAndTheirSource) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  uint16_t receiver_port = 0, sender_port = 0;
  UniqueFd receiver = bound_socket(SOCK_DGRAM, receiver_port);
  UniqueFd sender = bound_socket(SOCK_DGRAM, sender_port);
  sockaddr_in target = loopback(receiver_port);
  ASSERT_EQ(::connect(sender.get(), reinterpret_cast<sockaddr*>(&target), sizeof target), 0);
  struct Datagram {
    int32_t size = -1;
    std::string text;
    uint16_t from = 0;
  };
  std::vector<Datagram> got;
  test::run_to_end(
      *loop, [](EventLoop& l, int out, int in, std::vector<Datagram>& received) -> Task<> {
        // One gathering send (sendmsg) of two buffers: one datagram.
        struct Send : detail::VectoredSend {
          Send(EventLoop& loop, int socket) noexcept
              : VectoredSend(loop, socket, hook<&Send::finished>) {}
          void finished(int32_t r) noexcept {
            res = r;
            done = true;
          }
          int32_t res = 0;
          bool done = false;
        } send(l, out);
        Send& outcome = send;
        std::string first = "data", second = "gram";
        iovec pieces[2] = {{first.data(), first.size()}, {second.data(), second.size()}};
        EXPECT_TRUE(send.start(pieces));
        co_await wait_until(l, outcome.done);
        EXPECT_EQ(outcome.res, 8);
        EXPECT_EQ(::send(out, "abc", 3, 0), 3);
        for (int i = 0; i < 2; ++i) {
          std::array<char, 64> buffer{};
          sockaddr_in source{};
          iovec vector{buffer.data(), buffer.size()};
          msghdr message{};
          message.msg_name = &source;
          message.msg_namelen = sizeof source;
          message.msg_iov = &vector;
          message.msg_iovlen = 1;
          RawOp recvmsg(l);
          recvmsg.op().code = detail::OpCode::kRecvMsg;
          recvmsg.op().fd = in;
          recvmsg.op().data = &message;
          Datagram d;
          d.size = co_await recvmsg;
          if (d.size > 0) d.text.assign(buffer.data(), static_cast<size_t>(d.size));
          d.from = ntohs(source.sin_port);
          received.push_back(d);
        }
      }(*loop, sender.get(), receiver.get(), got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].size, 8);
  EXPECT_EQ(got[0].text, "datagram");
  EXPECT_EQ(got[0].from, sender_port);
  EXPECT_EQ(got[1].text, "abc");
}

TEST_P(Operations, RingMessagesExistOnlyWhereTheBackendHasThem) {
  auto sender = make_loop();
  auto receiver = make_loop();
  ASSERT_TRUE(sender && receiver);
  if (GetParam() == BackendKind::kIoUring) {
    if (!sender->capabilities().ring_messages) GTEST_SKIP() << "kernel lacks IORING_OP_MSG_RING";
    return;  // RingMessages in EventLoop_test covers them
  }
  EXPECT_FALSE(sender->capabilities().ring_messages);
  // The descriptor itself is refused, with nothing in flight.
  detail::Operation op;
  op.code = detail::OpCode::kRingMessage;
  op.aux = receiver.get();
  EXPECT_FALSE(detail::LoopAccess::submit(*sender, op));
  EXPECT_EQ(op.result, -EOPNOTSUPP);
  EXPECT_EQ(sender->in_flight(), 0u);
  Result<void> result;
  test::run_to_end(*sender, [](EventLoop& from, EventLoop& to, Result<void>& out) -> Task<> {
    out = co_await detail::send_message(from, to, 7);
  }(*sender, *receiver, result));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), std::errc::operation_not_supported);
}

// ---- datagrams ----

struct DatagramWait {
  detail::MultishotRecvMsg& stream;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> caller) noexcept { return stream.wait(caller); }
  void await_resume() const noexcept {}
};

std::string pattern(size_t size, size_t seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>('A' + (i * 7 + seed) % 53);
  return out;
}

// The raw descriptor: every completion of one kRecvMsgMultishot, as the backend reports it.
struct Completion {
  int32_t res;
  uint32_t flags;
  std::string payload;
  uint16_t source_port = 0;
  bool truncated = false;
};

struct MultishotDatagrams : detail::Operation {
  EventLoop* loop = nullptr;
  msghdr shape{};
  std::vector<Completion> seen;
  bool ended = false;
  static std::coroutine_handle<> on(IoContext& context, int32_t res, uint32_t flags) noexcept {
    auto& self = static_cast<MultishotDatagrams&>(context);
    Completion c{res, flags, {}, 0, false};
    if (flags & detail::kCompletionBuffer) {
      const uint16_t id = detail::buffer_id_of(flags);
      std::byte* buffer = detail::LoopAccess::receive_buffers(*self.loop)->buffer(id);
      if (auto view =
              detail::parse_datagram(buffer, static_cast<uint32_t>(res), self.shape.msg_namelen)) {
        c.payload = text_of(view->payload);
        c.truncated = view->truncated;
        if (view->source != nullptr) {
          c.source_port = ntohs(reinterpret_cast<const sockaddr_in*>(view->source)->sin_port);
        }
      }
      detail::LoopAccess::receive_buffers(*self.loop)->note_taken();
      detail::LoopAccess::receive_buffers(*self.loop)->recycle(id);
    }
    self.seen.push_back(std::move(c));
    if (!(flags & detail::kCompletionMore)) self.ended = true;
    return {};
  }
};

// The same datagrams give the same completions on both backends: one loop receive buffer each,
// laid out as io/detail/DatagramLayout.h draws, with kCompletionMore (a 0-byte datagram too,
// although the kernel ends io_uring's multishot recvmsg there: the backend starts it again); one
// longer than the buffer's room arrives cut, with MSG_TRUNC. A cancel ends it, with no buffer.
TEST_P(Operations, MultishotDatagramReceiveHasOneLayoutAndOneSetOfFlags) {
  LoopOptions options;
  options.provided_buffers_count = 16;
  options.provided_buffer_size = 1024;
  auto loop = make_loop(options);
  ASSERT_TRUE(loop);
  ASSERT_TRUE(loop->capabilities().multishot_receive);
  uint16_t receiver_port = 0, sender_port = 0;
  UniqueFd receiver = bound_socket(SOCK_DGRAM, receiver_port);
  UniqueFd sender = bound_socket(SOCK_DGRAM, sender_port);
  detail::LoopAccess::attach(*loop, receiver.get());
  sockaddr_in target = loopback(receiver_port);
  ASSERT_EQ(::connect(sender.get(), reinterpret_cast<sockaddr*>(&target), sizeof target), 0);
  const std::string big = pattern(2000, 3);  // 1024 - 48 bytes of room: cut
  for (const std::string& d : {pattern(1, 0), std::string(), pattern(500, 1), big}) {
    ASSERT_EQ(::send(sender.get(), d.data(), d.size(), 0), static_cast<ssize_t>(d.size()));
  }
  MultishotDatagrams op;
  op.loop = loop.get();
  op.code = detail::OpCode::kRecvMsgMultishot;
  op.fd = receiver.get();
  op.shape.msg_namelen = detail::kDatagramNameBytes;
  op.data = &op.shape;
  op.on_complete = &MultishotDatagrams::on;
  test::run_to_end(*loop, [](EventLoop& l, MultishotDatagrams& o) -> Task<> {
    EXPECT_TRUE(detail::LoopAccess::submit(l, o));
    for (int i = 0; i < 2000 && o.seen.size() < 4; ++i) co_await io::sleep_for(l, 1ms);
    detail::LoopAccess::cancel(l, o);
    for (int i = 0; i < 2000 && !o.ended; ++i) co_await io::sleep_for(l, 1ms);
  }(*loop, op));
  ASSERT_EQ(op.seen.size(), 5u);
  const uint32_t room = 1024 - detail::kDatagramHeadroom;
  const std::vector<std::string> expected = {pattern(1, 0), std::string(), pattern(500, 1),
                                             big.substr(0, room)};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("datagram " + std::to_string(i));
    const Completion& c = op.seen[i];
    EXPECT_EQ(c.flags & (detail::kCompletionBuffer | detail::kCompletionMore),
              detail::kCompletionBuffer | detail::kCompletionMore);
    EXPECT_EQ(c.res, static_cast<int32_t>(detail::kDatagramHeadroom + expected[i].size()));
    EXPECT_EQ(c.payload, expected[i]);
    EXPECT_EQ(c.source_port, sender_port);
    EXPECT_EQ(c.truncated, i == 3);
  }
  EXPECT_EQ(op.seen[4].res, -ECANCELED);
  EXPECT_EQ(op.seen[4].flags, 0u);
  EXPECT_EQ(detail::LoopAccess::receive_buffers(*loop)->held(), 0u);
  EXPECT_EQ(loop->in_flight(), 0u);
  detail::LoopAccess::detach(*loop, receiver.get());
}

// Through the stream: every datagram (0 bytes included) with its source, in order, across the
// receive's restarts, its pauses (more datagrams than kMaxQueued) and a pool too small for the
// burst (the pool fallback).
TEST_P(Operations, MultishotRecvMsgDeliversEveryDatagramWithItsSource) {
  for (uint32_t buffers : {512u, 4u}) {
    SCOPED_TRACE(std::to_string(buffers) + " receive buffers");
    LoopOptions options;
    options.provided_buffers_count = buffers;
    options.provided_buffer_size = 2048;
    auto loop = make_loop(options);
    ASSERT_TRUE(loop);
    ASSERT_TRUE(detail::MultishotRecvMsg::fits(*loop, 2000));
    EXPECT_FALSE(detail::MultishotRecvMsg::fits(*loop, 2001));
    uint16_t receiver_port = 0, first_port = 0, second_port = 0;
    UniqueFd receiver = bound_socket(SOCK_DGRAM, receiver_port);
    int size = 1 << 20;
    ::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    UniqueFd first = bound_socket(SOCK_DGRAM, first_port);
    UniqueFd second = bound_socket(SOCK_DGRAM, second_port);
    detail::LoopAccess::attach(*loop, receiver.get());
    sockaddr_in target = loopback(receiver_port);
    constexpr size_t kCount = 300;  // past kMaxQueued: the stream pauses at least once
    for (size_t i = 0; i < kCount; ++i) {
      const int from = i % 2 == 0 ? first.get() : second.get();
      const std::string d = pattern(i % 5 == 0 ? 0 : (i * 37) % 2000, i);
      ASSERT_EQ(::sendto(from, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&target),
                         sizeof target),
                static_cast<ssize_t>(d.size()));
    }
    std::vector<std::pair<std::string, uint16_t>> got;
    {
      detail::MultishotRecvMsg stream(*loop, receiver.get());
      test::run_to_end(*loop,
                       [](EventLoop& l, detail::MultishotRecvMsg& s,
                          std::vector<std::pair<std::string, uint16_t>>& out) -> Task<> {
                         co_await DatagramWait{s};
                         // Still receiving while the reader is away: the queue fills up to its
                         // bound.
                         co_await io::sleep_for(l, 20ms);
                         for (int rounds = 0; rounds < 100000 && out.size() < kCount; ++rounds) {
                           if (!s.has_data() && s.error() == 0) co_await DatagramWait{s};
                           if (s.error() != 0) {
                             ADD_FAILURE() << "error " << s.take_error();
                             break;
                           }
                           while (s.has_data()) {
                             ReceivedDatagram d = s.pop();
                             EXPECT_FALSE(d.truncated);
                             const auto& source = reinterpret_cast<const sockaddr_in&>(d.source);
                             out.emplace_back(text_of(d.data.bytes()), ntohs(source.sin_port));
                           }
                         }
                         s.stop();
                         for (int i = 0; i < 1000 && s.busy(); ++i) co_await io::sleep_for(l, 1ms);
                       }(*loop, stream, got));
      EXPECT_FALSE(stream.busy());
      if (buffers > 4) {
        EXPECT_GE(stream.pauses(), 1u);
      }
    }
    ASSERT_EQ(got.size(), kCount);
    for (size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(got[i].first, pattern(i % 5 == 0 ? 0 : (i * 37) % 2000, i)) << "datagram " << i;
      EXPECT_EQ(got[i].second, i % 2 == 0 ? first_port : second_port) << "datagram " << i;
    }
    EXPECT_EQ(detail::LoopAccess::receive_buffers(*loop)->held(), 0u);
    EXPECT_EQ(loop->in_flight(), 0u);
    detail::LoopAccess::detach(*loop, receiver.get());
  }
}

// Many sendmsg operations on one datagram socket in one iteration (epoll: one sendmmsg; io_uring:
// one submission): each is its own datagram, each result its own length, in order.
TEST_P(Operations, SendmsgBatchOnOneDatagramSocketKeepsEveryDatagram) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  uint16_t receiver_port = 0, sender_port = 0;
  UniqueFd receiver = bound_socket(SOCK_DGRAM, receiver_port);
  UniqueFd sender = bound_socket(SOCK_DGRAM, sender_port);
  detail::LoopAccess::attach(*loop, sender.get());
  constexpr size_t kCount = 100;  // more than one sendmmsg's worth on epoll
  std::vector<std::string> payloads;
  for (size_t i = 0; i < kCount; ++i) payloads.push_back(pattern(i * 11, i));
  struct Slot {
    std::unique_ptr<RawOp> op;
    msghdr message{};
    iovec vector{};
  };
  std::vector<Slot> slots(kCount);
  sockaddr_in target = loopback(receiver_port);
  std::vector<int32_t> results;
  test::run_to_end(
      *loop,
      [](EventLoop& l, int fd, std::vector<Slot>& ops, std::vector<std::string>& data,
         sockaddr_in& to, std::vector<int32_t>& out) -> Task<> {
        size_t done = 0;
        for (size_t i = 0; i < ops.size(); ++i) {
          Slot& slot = ops[i];
          slot.op = std::make_unique<RawOp>(l);
          slot.vector = {data[i].data(), data[i].size()};
          slot.message.msg_name = &to;
          slot.message.msg_namelen = sizeof to;
          slot.message.msg_iov = &slot.vector;
          slot.message.msg_iovlen = 1;
          slot.op->op().code = detail::OpCode::kSendMsg;
          slot.op->op().fd = fd;
          slot.op->op().data = &slot.message;
          l.spawn([](RawOp& op, int32_t& result, size_t& count) -> Task<> {
            result = co_await op;
            ++count;
          }(*slot.op, out[i], done));
        }
        for (int i = 0; i < 2000 && done < ops.size(); ++i) co_await io::sleep_for(l, 1ms);
      }(*loop, sender.get(), slots, payloads, target, results = std::vector<int32_t>(kCount, -1)));
  for (size_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(results[i], static_cast<int32_t>(payloads[i].size())) << "datagram " << i;
  }
  std::vector<char> buffer(4096);
  for (size_t i = 0; i < kCount; ++i) {
    const ssize_t n = ::recv(receiver.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    ASSERT_EQ(n, static_cast<ssize_t>(payloads[i].size())) << "datagram " << i;
    EXPECT_EQ(std::string(buffer.data(), static_cast<size_t>(n)), payloads[i]);
  }
  EXPECT_EQ(loop->in_flight(), 0u);
  detail::LoopAccess::detach(*loop, sender.get());
}

// ---- files ----

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/ucp-ops-XXXXXX";
    path = ::mkdtemp(name) != nullptr ? name : "";
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf " + path).c_str());
  }
};

TEST_P(Operations, OpenatFsyncAndCloseThroughTheLoop) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/data";
  Result<UniqueFd> missing = UniqueFd();
  std::string contents;
  test::run_to_end(
      *loop,
      [](EventLoop& l, const std::string& p, Result<UniqueFd>& absent, std::string& out) -> Task<> {
        absent = co_await io::openat(l, AT_FDCWD, (p + ".missing").c_str(), O_RDONLY);
        auto file = co_await io::openat(l, AT_FDCWD, p.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
        EXPECT_TRUE(file);
        if (!file) co_return;
        EXPECT_TRUE(::fcntl(file->get(), F_GETFD) & FD_CLOEXEC);
        EXPECT_TRUE(co_await io::write(l, file->get(), bytes_of("synced bytes"), 0));
        EXPECT_TRUE(co_await io::fsync(l, file->get()));
        EXPECT_TRUE(co_await io::fdatasync(l, file->get()));
        EXPECT_TRUE(co_await io::close(l, file->release()));
        auto again = co_await io::openat(l, AT_FDCWD, p.c_str(), O_RDONLY);
        EXPECT_TRUE(again);
        if (!again) co_return;
        std::array<std::byte, 64> buffer;
        auto n = co_await io::read(l, again->get(), buffer, 0);
        if (n) out = text_of(std::span(buffer.data(), *n));
      }(*loop, path, missing, contents));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
  EXPECT_EQ(contents, "synced bytes");
  struct stat status {};
  ASSERT_EQ(::stat(path.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
  EXPECT_EQ(loop->in_flight(), 0u);
}

// A connected loopback TCP pair; `small` shrinks both socket buffers so that a large send has
// to wait for the reader (the send file path's EAGAIN and poll).
struct TcpPair {
  UniqueFd client, server;
  explicit TcpPair(bool small = false) {
    uint16_t port = 0;
    UniqueFd listener = bound_socket(SOCK_STREAM, port);
    client = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (small) {
      int bytes = 16 * 1024;
      ::setsockopt(client.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    }
    sockaddr_in address = loopback(port);
    EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    server = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (small) {
      int bytes = 16 * 1024;
      ::setsockopt(server.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    }
  }
};

UniqueFd file_with(const std::string& contents) {
  char path[] = "/tmp/ucp-sendfile-XXXXXX";
  UniqueFd file(::mkstemp(path));
  ::unlink(path);
  EXPECT_EQ(::pwrite(file.get(), contents.data(), contents.size(), 0),
            static_cast<ssize_t>(contents.size()));
  return file;
}

// Reads `want` bytes (or until EOF) from `fd` in the loop, 1 ms at a time: a slow reader.
Task<> read_slowly(EventLoop& loop, int fd, size_t want, std::string& out, bool& done) {
  std::array<std::byte, 8192> buffer;
  while (out.size() < want) {
    auto n = co_await io::recv(loop, fd, buffer, 5000);
    if (!n || *n == 0) break;
    out += text_of(std::span(buffer.data(), *n));
    co_await io::sleep_for(loop, 1ms);
  }
  done = true;
}

TEST_P(Operations, SendFileMovesAFileRegionToASocketUnchanged) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  const std::string contents = pattern(3 * 1024 * 1024 + 123, 5);  // several pipes' worth
  UniqueFd file = file_with(contents);
  TcpPair pair(true);  // small buffers and a slow reader: the sender waits for room
  detail::LoopAccess::attach(*loop, pair.server.get());
  struct Outcome {
    Result<uint64_t> whole = Unexpected{std::errc::io_error};
    Result<uint64_t> middle = Unexpected{std::errc::io_error};
    Result<uint64_t> past_end = Unexpected{std::errc::io_error};
    Result<uint64_t> at_end = Unexpected{std::errc::io_error};
    std::string received;
  } o;
  test::run_to_end(*loop,
                   [](EventLoop& l, int server, int client, int f, const std::string& data,
                      Outcome& out) -> Task<> {
                     const size_t want = data.size() + 70000 + 1000;
                     bool read_done = false;
                     l.spawn(read_slowly(l, client, want, out.received, read_done));
                     out.whole = co_await io::send_file(l, server, f, 0, data.size());
                     out.middle = co_await io::send_file(l, server, f, 4097, 70000);
                     out.past_end = co_await io::send_file(l, server, f, data.size() - 1000, 5000);
                     out.at_end = co_await io::send_file(l, server, f, data.size(), 10);
                     for (int i = 0; i < 20000 && !read_done; ++i) co_await io::sleep_for(l, 1ms);
                   }(*loop, pair.server.get(), pair.client.get(), file.get(), contents, o));
  ASSERT_TRUE(o.whole) << o.whole.error().message();
  EXPECT_EQ(*o.whole, contents.size());
  ASSERT_TRUE(o.middle);
  EXPECT_EQ(*o.middle, 70000u);
  ASSERT_TRUE(o.past_end);
  EXPECT_EQ(*o.past_end, 1000u);  // the file ended first
  ASSERT_TRUE(o.at_end);
  EXPECT_EQ(*o.at_end, 0u);
  const std::string expected =
      contents + contents.substr(4097, 70000) + contents.substr(contents.size() - 1000);
  EXPECT_EQ(o.received.size(), expected.size());
  EXPECT_TRUE(o.received == expected) << "bytes lost, reordered or changed";
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 0);  // positional: the file position stays
  EXPECT_EQ(loop->in_flight(), 0u);
  detail::LoopAccess::detach(*loop, pair.server.get());
}

TEST_P(Operations, SendFileToAPeerThatLeftFailsWithoutSigpipe) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  UniqueFd file = file_with(pattern(1 << 20, 1));
  TcpPair pair;
  int linger_bytes[2] = {1, 0};  // close with RST
  ::setsockopt(pair.client.get(), SOL_SOCKET, SO_LINGER, linger_bytes, sizeof linger_bytes);
  pair.client.reset();
  detail::LoopAccess::attach(*loop, pair.server.get());
  Result<uint64_t> sent = uint64_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int server, int f, Result<uint64_t>& out) -> Task<> {
    co_await io::sleep_for(l, 5ms);  // the reset has arrived
    out = co_await io::send_file(l, server, f, 0, 1 << 20);
  }(*loop, pair.server.get(), file.get(), sent));
  ASSERT_FALSE(sent);
  EXPECT_TRUE(sent.error() == std::errc::broken_pipe || sent.error() == std::errc::connection_reset)
      << sent.error().message();
  EXPECT_EQ(loop->in_flight(), 0u);
  detail::LoopAccess::detach(*loop, pair.server.get());
}

TEST_P(Operations, SendFileToAPeerThatNeverReadsEndsWithItsDeadline) {
  auto loop = make_loop();
  ASSERT_TRUE(loop);
  UniqueFd file = file_with(pattern(8 << 20, 2));
  TcpPair pair(true);
  detail::LoopAccess::attach(*loop, pair.server.get());
  Result<uint64_t> sent = uint64_t{0};
  test::run_to_end(*loop, [](EventLoop& l, int server, int f, Result<uint64_t>& out) -> Task<> {
    out = co_await with_timeout(io::send_file(l, server, f, 0, 8 << 20), 50ms);
  }(*loop, pair.server.get(), file.get(), sent));
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error(), std::errc::timed_out);
  EXPECT_EQ(loop->in_flight(), 0u);
  detail::LoopAccess::detach(*loop, pair.server.get());
}

}  // namespace
}  // namespace ucp
