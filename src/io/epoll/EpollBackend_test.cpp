// What only the epoll backend can get wrong: state kept per fd number (an fd closed behind
// the loop's back and its number reused), edge-triggered readiness (a peer that keeps sending
// while nobody reads must not make the loop spin; a send parked on a full socket buffer must
// wake when the peer reads), fds the application made blocking, file I/O on worker threads,
// and the choice of backend where io_uring is blocked (a seccomp filter in a child process).

#include "EpollBackend.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ucp/io/Operations.h"
#include "ucp/io/detail/LoopAccess.h"
#include "ucp/io/detail/MultishotRecv.h"

#include "SeccompFilter.h"
#include "SocketPair.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<EventLoop> make_epoll_loop(LoopOptions options = {}) {
  options.backend = BackendKind::kEpoll;
  auto loop = EventLoop::create(options);
  if (!loop) {
    ADD_FAILURE() << EventLoop::describe_setup_error(loop.error(), options);
    return nullptr;
  }
  return std::move(*loop);
}

detail::EpollBackend& epoll_of(EventLoop& loop) {
  return static_cast<detail::EpollBackend&>(detail::LoopAccess::backend(loop));
}

void run_task(EventLoop& loop, Task<> body) {
  loop.spawn([](EventLoop& l, Task<> inner) -> Task<> {
    co_await std::move(inner);
    l.stop();
  }(loop, std::move(body)));
  loop.run();
}

using test::SocketPair;

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string text_of(std::span<const std::byte> bytes, size_t n) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), n);
}

Task<> wait_until(EventLoop& loop, const bool& done) {
  for (int i = 0; i < 5000 && !done; ++i) co_await io::sleep_for(loop, 1ms);
}

std::chrono::nanoseconds thread_cpu_time() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

bool is_nonblocking(int fd) { return (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

TEST(EpollBackend, DescribesItselfAndWhatItCanDo) {
  LoopOptions options;
  options.provided_buffers_count = 100;  // rounded up to a power of two, as on io_uring
  options.provided_buffer_size = 2048;
  auto loop = make_epoll_loop(options);
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->backend_kind(), BackendKind::kEpoll);
  EXPECT_STREQ(loop->backend_name(), "epoll");
  EXPECT_EQ(loop->describe(),
            "epoll: edge_triggered=on receive_buffers=128x2048 file_workers=2 busy_poll=off");
  EXPECT_TRUE(loop->capabilities().multishot_accept);
  EXPECT_TRUE(loop->capabilities().multishot_receive);
  EXPECT_FALSE(loop->capabilities().ring_messages);
  EXPECT_FALSE(loop->capabilities().registered_buffers);
  EXPECT_EQ(detail::LoopAccess::borrow_receive_buffer(*loop).source(), BufferLease::Source::kPool);
}

TEST(EpollBackend, IoUringOnlyOptionsGiveOneWarningEachAndAreIgnored) {
  LoopOptions options;
  options.backend = BackendKind::kEpoll;
  options.sqpoll = true;
  options.registered_buffers_count = 8;
  std::string warnings;
  auto loop = EventLoop::create(options, &warnings);
  ASSERT_TRUE(loop);
  EXPECT_NE(warnings.find("sqpoll: io_uring only"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("registered_buffers_count: io_uring only"), std::string::npos);
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 2) << warnings;
}

// ---- fd numbers reused behind the loop's back ----

// A receive that timed out leaves a one-shot registration armed for a socket the application
// then closes; a new socket gets the same number. Its receive must be registered afresh.
TEST(EpollBackend, AnFdClosedOutsideTheLoopAndReusedInheritsNothing) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  auto first = std::make_unique<SocketPair>();
  const int number = first->b.get();
  Result<size_t> timed_out = size_t{0};
  Result<size_t> reused = Unexpected{std::errc::io_error};
  std::string got;
  run_task(*loop,
           [](EventLoop& l, std::unique_ptr<SocketPair>& old, int fd_number, Result<size_t>& stale,
              Result<size_t>& fresh, std::string& out) -> Task<> {
             std::array<std::byte, 16> buffer;
             stale = co_await io::recv(l, old->b.get(), buffer, /*timeout_ms=*/10);
             old.reset();  // closed outside the loop, no detach, no io::close
             SocketPair next;
             EXPECT_EQ(next.b.get(), fd_number)
                 << "the number was not reused: the test proves nothing";
             bool done = false;
             l.spawn([](EventLoop& inner, int fd, Result<size_t>& r, std::string& text,
                        bool& finished) -> Task<> {
               std::array<std::byte, 16> into;
               r = co_await io::recv(inner, fd, into, /*timeout_ms=*/5000);
               if (r) text = text_of(into, *r);
               finished = true;
             }(l, next.b.get(), fresh, out, done));
             co_await io::sleep_for(l, 5ms);  // the receive is parked by now
             EXPECT_EQ(::send(next.a.get(), "fresh", 5, MSG_NOSIGNAL), 5);
             co_await wait_until(l, done);
           }(*loop, first, number, timed_out, reused, got));
  EXPECT_EQ(timed_out.error(), std::errc::timed_out);
  ASSERT_TRUE(reused) << reused.error().message();
  EXPECT_EQ(got, "fresh");
}

// The same for an attached fd (its edge-triggered registration and hints) and for a pipe the
// backend made non-blocking: the blocking pipe that reuses the number must not block the loop.
TEST(EpollBackend, AttachedAndNonBlockingStateDiesWithTheFdNumber) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  std::vector<std::string> events;
  run_task(*loop, [](EventLoop& l, std::vector<std::string>& log) -> Task<> {
    std::array<std::byte, 16> buffer;
    int number;
    {
      SocketPair old;
      detail::LoopAccess::attach(l, old.b.get());
      EXPECT_EQ(::send(old.a.get(), "x", 1, MSG_NOSIGNAL), 1);
      auto n = co_await io::recv(l, old.b.get(), std::span(buffer).first(1));
      EXPECT_TRUE(n);  // a full read: the hint says readable still
      detail::LoopAccess::detach(l, old.b.get());
      number = old.b.get();
    }
    {
      SocketPair next;
      EXPECT_EQ(next.b.get(), number);
      detail::LoopAccess::attach(l, next.b.get());
      bool done = false;
      l.spawn([](EventLoop& inner, int fd, std::vector<std::string>& o, bool& d) -> Task<> {
        std::array<std::byte, 16> into;
        auto r = co_await io::recv(inner, fd, into, 5000);
        o.push_back(r ? "socket " + text_of(into, *r) : "socket " + r.error().message());
        d = true;
      }(l, next.b.get(), log, done));
      co_await io::sleep_for(l, 10ms);
      log.push_back("timer");
      EXPECT_EQ(::send(next.a.get(), "y", 1, MSG_NOSIGNAL), 1);
      co_await wait_until(l, done);
      detail::LoopAccess::detach(l, next.b.get());
    }
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    {
      UniqueFd in(fds[0]), out(fds[1]);
      EXPECT_EQ(::write(out.get(), "p", 1), 1);
      auto n = co_await io::read(l, in.get(), buffer);
      EXPECT_TRUE(n);
      EXPECT_TRUE(is_nonblocking(in.get()));
      number = in.get();
    }
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);  // blocking again, same number
    UniqueFd in(fds[0]), out(fds[1]);
    EXPECT_EQ(in.get(), number);
    bool done = false;
    l.spawn([](EventLoop& inner, int fd, std::vector<std::string>& o, bool& d) -> Task<> {
      std::array<std::byte, 16> into;
      auto r = co_await io::read(inner, fd, into);
      o.push_back(r ? "pipe " + text_of(into, *r) : "pipe " + r.error().message());
      d = true;
    }(l, in.get(), log, done));
    co_await io::sleep_for(l, 10ms);
    log.push_back("timer");
    EXPECT_EQ(::write(out.get(), "q", 1), 1);
    co_await wait_until(l, done);
  }(*loop, events));
  EXPECT_EQ(events, (std::vector<std::string>{"timer", "socket y", "timer", "pipe q"}));
}

TEST(EpollBackend, DetachWithOperationsWaitingKeepsThemRunning) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  Result<size_t> received = Unexpected{std::errc::io_error};
  run_task(*loop, [](EventLoop& l, int a, int b, Result<size_t>& out) -> Task<> {
    detail::LoopAccess::attach(l, b);
    bool done = false;
    l.spawn([](EventLoop& inner, int fd, Result<size_t>& r, bool& d) -> Task<> {
      std::array<std::byte, 16> into;
      r = co_await io::recv(inner, fd, into, 5000);
      d = true;
    }(l, b, out, done));
    co_await io::sleep_for(l, 2ms);
    detail::LoopAccess::detach(l, b);  // still waited on
    EXPECT_EQ(::send(a, "late", 4, MSG_NOSIGNAL), 4);
    co_await wait_until(l, done);
  }(*loop, pair.a.get(), pair.b.get(), received));
  ASSERT_TRUE(received) << received.error().message();
  EXPECT_EQ(*received, 4u);
}

TEST(EpollBackend, ReceivesWaitingOnOneFdCompleteInSubmissionOrder) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;
  detail::LoopAccess::attach(*loop, pair.b.get());
  std::string order;
  run_task(*loop, [](EventLoop& l, int a, int b, std::string& out) -> Task<> {
    int finished = 0;
    for (int i = 0; i < 3; ++i) {
      l.spawn([](EventLoop& inner, int fd, std::string& o, int& f) -> Task<> {
        std::array<std::byte, 1> one;
        auto r = co_await io::recv(inner, fd, one, 5000);
        if (r && *r == 1) o += static_cast<char>(one[0]);
        ++f;
      }(l, b, out, finished));
    }
    co_await io::sleep_for(l, 2ms);
    EXPECT_EQ(::send(a, "abc", 3, MSG_NOSIGNAL), 3);
    for (int i = 0; i < 5000 && finished < 3; ++i) co_await io::sleep_for(l, 1ms);
  }(*loop, pair.a.get(), pair.b.get(), order));
  EXPECT_EQ(order, "abc");
  detail::LoopAccess::detach(*loop, pair.b.get());
}

// ---- edge-triggered readiness ----

// The reader stops reading: the multishot receive pauses (kMaxQueued chunks queued) while the
// peer keeps sending. The fd stays readable, which a level-triggered loop would report on every
// wait; edge-triggered, the loop wakes only when new bytes arrive and the pause costs nothing.
TEST(EpollBackend, PeerSendingWhileTheReceiveIsPausedDoesNotSpinTheLoop) {
  LoopOptions options;
  options.provided_buffers_count = 64;
  options.provided_buffer_size = 1024;
  auto loop = make_epoll_loop(options);
  ASSERT_TRUE(loop);
  SocketPair pair;
  detail::LoopAccess::attach(*loop, pair.b.get());
  std::atomic<bool> stop_sending{false};
  std::atomic<uint64_t> sent{0};
  std::thread sender([&] {
    std::vector<char> chunk(1024, 's');
    while (!stop_sending.load()) {  // ~1 KiB a millisecond until the socket buffer fills
      ssize_t n = ::send(pair.a.get(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<uint64_t>(n);
      std::this_thread::sleep_for(1ms);
    }
  });
  struct Report {
    uint64_t pauses = 0;
    uint64_t waits_while_paused = 0;
    std::chrono::nanoseconds cpu_while_paused{};
    uint64_t received = 0;
  } report;
  {
    detail::MultishotRecv stream(*loop, pair.b.get());
    run_task(*loop,
             [](EventLoop& l, detail::MultishotRecv& s, std::atomic<bool>& stop,
                std::atomic<uint64_t>& total, int writer, Report& r) -> Task<> {
               struct Wait {
                 detail::MultishotRecv& stream;
                 bool await_ready() const noexcept { return false; }
                 bool await_suspend(std::coroutine_handle<> h) noexcept { return stream.wait(h); }
                 void await_resume() const noexcept {}
               };
               co_await Wait{s};
               // Not reading: the queue fills and the receive pauses.
               for (int i = 0; i < 1000 && s.pauses() == 0; ++i) co_await io::sleep_for(l, 1ms);
               r.pauses = s.pauses();
               const uint64_t waits_before = l.stats().submit_calls;
               const auto cpu_before = thread_cpu_time();
               co_await io::sleep_for(l, 300ms);  // the peer keeps sending meanwhile
               r.waits_while_paused = l.stats().submit_calls - waits_before;
               r.cpu_while_paused = thread_cpu_time() - cpu_before;
               stop = true;
               co_await io::sleep_for(l, 5ms);
               ::shutdown(writer, SHUT_WR);
               std::array<std::byte, 4096> sink;
               for (int i = 0; i < 100000; ++i) {
                 if (!s.has_data() && !s.at_eof() && s.error() == 0) co_await Wait{s};
                 r.received += s.copy_out(sink);
                 if (!s.has_data() && (s.at_eof() || s.error() != 0)) break;
               }
               for (int i = 0; i < 1000 && s.busy(); ++i) co_await io::sleep_for(l, 1ms);
               EXPECT_EQ(r.received, total.load());
             }(*loop, stream, stop_sending, sent, pair.a.get(), report));
  }
  stop_sending = true;
  sender.join();
  EXPECT_GE(report.pauses, 1u);
  // One wait per arrival at most (~300 in 300 ms, fewer once the socket buffer is full); a
  // spinning loop makes hundreds of thousands.
  EXPECT_LT(report.waits_while_paused, 3000u);
  EXPECT_LT(report.cpu_while_paused, 50ms) << "the loop thread was busy while nothing was read";
  std::printf("paused 300 ms: %llu waits, %.1f ms CPU on the loop thread\n",
              static_cast<unsigned long long>(report.waits_while_paused),
              static_cast<double>(report.cpu_while_paused.count()) / 1e6);
  detail::LoopAccess::detach(*loop, pair.b.get());
}

// Two sends on a socket whose buffer is full: both park, in order, and wake as the peer reads.
// Attached (edge-triggered hints) and not attached (one-shot registration).
TEST(EpollBackend, SendsParkedOnAFullSocketBufferWakeInOrderWhenThePeerReads) {
  for (bool attached : {true, false}) {
    SCOPED_TRACE(attached ? "attached" : "not attached");
    auto loop = make_epoll_loop();
    ASSERT_TRUE(loop);
    SocketPair pair;
    int small = 4096;
    ::setsockopt(pair.a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    std::string filler(4096, 'f');
    uint64_t prefilled = 0;
    for (;;) {  // fill the buffer before the loop sends anything
      ssize_t n = ::send(pair.a.get(), filler.data(), filler.size(), MSG_DONTWAIT);
      if (n <= 0) break;
      prefilled += static_cast<uint64_t>(n);
    }
    if (attached) detail::LoopAccess::attach(*loop, pair.a.get());
    std::string first(100000, '1'), second(50000, '2');
    std::vector<std::pair<char, int32_t>> completions;
    std::string received;
    std::thread reader;
    run_task(*loop,
             [](EventLoop& l, int a, int b, const std::string& one, const std::string& two,
                uint64_t skip, std::vector<std::pair<char, int32_t>>& done, std::string& got,
                std::thread& peer) -> Task<> {
               for (const std::string* data : {&one, &two}) {
                 l.spawn([](EventLoop& inner, int fd, const std::string& d,
                            std::vector<std::pair<char, int32_t>>& out) -> Task<> {
                   auto r = co_await io::send(inner, fd, bytes_of(d));
                   out.emplace_back(d[0], r ? static_cast<int32_t>(*r) : -1);
                 }(l, a, *data, done));
               }
               co_await io::sleep_for(l, 10ms);
               EXPECT_TRUE(done.empty()) << "a send completed on a full socket buffer";
               peer = std::thread([b, skip, &got] {  // reads slowly until 1 s without data
                 std::vector<char> buffer(8192);
                 uint64_t skipped = 0;
                 for (;;) {
                   pollfd p{b, POLLIN, 0};
                   if (::poll(&p, 1, 1000) <= 0) return;
                   ssize_t n = ::recv(b, buffer.data(), buffer.size(), MSG_DONTWAIT);
                   if (n <= 0) return;
                   size_t from = 0;
                   while (skipped < skip && from < static_cast<size_t>(n)) ++skipped, ++from;
                   got.append(buffer.data() + from, static_cast<size_t>(n) - from);
                   std::this_thread::sleep_for(100us);
                 }
               });
               for (int i = 0; i < 10000 && done.size() < 2; ++i) co_await io::sleep_for(l, 1ms);
             }(*loop, pair.a.get(), pair.b.get(), first, second, prefilled, completions, received,
                                   reader));
    reader.join();
    ASSERT_EQ(completions.size(), 2u);
    EXPECT_EQ(completions[0].first, '1');  // FIFO: the second waited behind the first
    EXPECT_EQ(completions[1].first, '2');
    ASSERT_GT(completions[0].second, 0);
    ASSERT_GT(completions[1].second, 0);
    const std::string expected = first.substr(0, static_cast<size_t>(completions[0].second)) +
                                 second.substr(0, static_cast<size_t>(completions[1].second));
    EXPECT_TRUE(received == expected) << "bytes out of order or lost";
    if (attached) detail::LoopAccess::detach(*loop, pair.a.get());
  }
}

// ---- blocking fds of the application ----

TEST(EpollBackend, BlockingSocketsOfTheApplicationNeverBlockTheLoop) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  SocketPair pair;  // blocking, both ends
  detail::LoopAccess::attach(*loop, pair.b.get());
  std::vector<std::string> events;
  run_task(*loop, [](EventLoop& l, int a, int b, std::vector<std::string>& log) -> Task<> {
    // A full one-byte read leaves the hint "readable": the next receive is tried at once,
    // must not block, and waits for the next byte while timers run.
    EXPECT_EQ(::send(a, "1", 1, MSG_NOSIGNAL), 1);
    std::array<std::byte, 1> one;
    auto n = co_await io::recv(l, b, one);
    EXPECT_TRUE(n);
    bool done = false;
    l.spawn([](EventLoop& inner, int fd, std::vector<std::string>& o, bool& d) -> Task<> {
      std::array<std::byte, 1> byte;
      auto r = co_await io::recv(inner, fd, byte);
      o.push_back(r ? "recv " + text_of(byte, *r) : "recv failed");
      d = true;
    }(l, b, log, done));
    co_await io::sleep_for(l, 10ms);
    log.push_back("timer");
    EXPECT_EQ(::send(a, "2", 1, MSG_NOSIGNAL), 1);
    co_await wait_until(l, done);
  }(*loop, pair.a.get(), pair.b.get(), events));
  EXPECT_EQ(events, (std::vector<std::string>{"timer", "recv 2"}));
  // Receives and sends pass MSG_DONTWAIT: the application's socket stays blocking.
  EXPECT_FALSE(is_nonblocking(pair.b.get()));
  detail::LoopAccess::detach(*loop, pair.b.get());
}

TEST(EpollBackend, AcceptOnABlockingListenerWaitsWithoutBlocking) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener.get(), 16), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
  detail::LoopAccess::attach(*loop, listener.get());
  std::vector<std::string> events;
  std::vector<UniqueFd> clients;
  run_task(
      *loop,
      [](EventLoop& l, int fd, sockaddr_in to, std::vector<UniqueFd>& mine,
         std::vector<std::string>& log) -> Task<> {
        auto connect_one = [&mine, to] {
          mine.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
          return ::connect(mine.back().get(), reinterpret_cast<const sockaddr*>(&to), sizeof to);
        };
        EXPECT_EQ(connect_one(), 0);
        auto first = co_await io::accept(l, fd);
        EXPECT_TRUE(first);
        bool done = false;
        l.spawn([](EventLoop& inner, int listen_fd, std::vector<std::string>& o,
                   bool& d) -> Task<> {
          auto r = co_await io::accept(inner, listen_fd);  // the hint is stale: tried, then waits
          o.push_back(r ? "accepted" : "accept failed");
          d = true;
        }(l, fd, log, done));
        co_await io::sleep_for(l, 10ms);
        log.push_back("timer");
        EXPECT_EQ(connect_one(), 0);
        co_await wait_until(l, done);
      }(*loop, listener.get(), address, clients, events));
  EXPECT_EQ(events, (std::vector<std::string>{"timer", "accepted"}));
  detail::LoopAccess::detach(*loop, listener.get());
}

// ---- files ----

constexpr int kBlocks = 64;
constexpr size_t kBlock = 512;

// Reads and writes on worker threads (RWF_NOWAIT off, so every one goes there): many at
// once, each with its own offset, and a close through the loop while they run (the jobs hold
// their own reference to the file). TSan covers the hand-over both ways.
TEST(EpollBackend, FileOperationsOnTheWorkersCompleteWithTheirOwnBytes) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  epoll_of(*loop).set_file_nowait(false);
  char path[] = "/tmp/ucp-epoll-file-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  int mismatches = 0, completed = 0;
  run_task(*loop, [](EventLoop& l, int file, int& bad, int& ok) -> Task<> {
    std::vector<std::string> blocks;
    for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(kBlock, static_cast<char>('A' + i % 26));
    int writes = 0;
    for (int i = 0; i < kBlocks; ++i) {
      l.spawn(
          [](EventLoop& inner, int f, const std::string& data, uint64_t at, int& done) -> Task<> {
            auto w = co_await io::write(inner, f, bytes_of(data), at);
            EXPECT_TRUE(w);
            ++done;
          }(l, file, blocks[static_cast<size_t>(i)], uint64_t{kBlock} * static_cast<uint64_t>(i),
                                                                                       writes));
    }
    for (int i = 0; i < 10000 && writes < kBlocks; ++i) co_await io::sleep_for(l, 1ms);
    EXPECT_EQ(writes, kBlocks);
    EXPECT_TRUE(epoll_of(l).file_workers_started());
    for (int i = 0; i < kBlocks; ++i) {
      l.spawn([](EventLoop& inner, int f, int index, int& wrong, int& done) -> Task<> {
        std::array<std::byte, kBlock> into;
        auto r = co_await io::read(inner, f, into, uint64_t{kBlock} * static_cast<uint64_t>(index));
        if (!r || *r != kBlock ||
            text_of(into, kBlock) != std::string(kBlock, static_cast<char>('A' + index % 26))) {
          ++wrong;
        }
        ++done;
      }(l, file, i, bad, ok));
    }
    auto closed = co_await io::close(l, file);  // while reads may still run
    EXPECT_TRUE(closed);
    for (int i = 0; i < 10000 && ok < kBlocks; ++i) co_await io::sleep_for(l, 1ms);
  }(*loop, fd, mismatches, completed));
  EXPECT_EQ(completed, kBlocks);
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(loop->in_flight(), 0u);
}

TEST(EpollBackend, PageCacheReadsCompleteWithoutTheWorkers) {
  auto loop = make_epoll_loop();
  ASSERT_TRUE(loop);
  char path[] = "/tmp/ucp-epoll-file-XXXXXX";
  UniqueFd file(::mkstemp(path));
  ASSERT_TRUE(file);
  ::unlink(path);
  std::string data(4096, 'c');
  ASSERT_EQ(::pwrite(file.get(), data.data(), data.size(), 0), 4096);  // now in the page cache
  Result<size_t> read = size_t{0};
  run_task(*loop, [](EventLoop& l, int fd, Result<size_t>& out) -> Task<> {
    std::array<std::byte, 4096> into;
    out = co_await io::read(l, fd, into, 0);
  }(*loop, file.get(), read));
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, 4096u);
  EXPECT_FALSE(epoll_of(*loop).file_workers_started()) << "RWF_NOWAIT should have served it";
}

// ---- choosing the backend where io_uring is blocked ----

struct FilterCase {
  const char* name;
  int error;        // what the seccomp filter makes io_uring_setup return
  bool falls_back;  // auto then runs on epoll (EPERM, ENOSYS) or fails (EMFILE)
};

class BackendChoice : public ::testing::TestWithParam<FilterCase> {};

// In a child process under a seccomp filter: `auto` runs on epoll with one warning that names
// seccomp and the way back; `io_uring` fails with a line that says the same. Each step that
// goes wrong exits with its own code.
TEST_P(BackendChoice, AutoFallsBackOnlyWhereIoUringIsBlocked) {
  const FilterCase param = GetParam();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!test::block_io_uring_setup(param.error)) ::_exit(10);
    std::string warnings;
    auto loop = EventLoop::create(LoopOptions{}, &warnings);
    if (!param.falls_back) ::_exit(loop ? 11 : 0);  // a limit of this process, not the host
    if (!loop) ::_exit(12);
    if ((*loop)->backend_kind() != BackendKind::kEpoll) ::_exit(13);
    if (std::count(warnings.begin(), warnings.end(), '\n') != 1) ::_exit(14);
    if (warnings.find("seccomp") == std::string::npos) ::_exit(15);
    if (warnings.find("deploy/seccomp-io_uring.json") == std::string::npos) ::_exit(16);
    if (warnings.find("epoll") == std::string::npos) ::_exit(17);
    // It works: one message through a socketpair.
    SocketPair pair;
    std::string got;
    run_task(**loop, [](EventLoop& l, int a, int b, std::string& out) -> Task<> {
      (void)co_await io::send(l, a, bytes_of("fallback"));
      std::array<std::byte, 16> into;
      auto n = co_await io::recv(l, b, into, 5000);
      if (n) out = text_of(into, *n);
    }(**loop, pair.a.get(), pair.b.get(), got));
    if (got != "fallback") ::_exit(18);
    LoopOptions strict;
    strict.backend = BackendKind::kIoUring;
    auto refused = EventLoop::create(strict);
    if (refused) ::_exit(19);
    std::string line = EventLoop::describe_setup_error(refused.error(), strict);
    if (line.find("seccomp") == std::string::npos ||
        line.find("backend = auto") == std::string::npos) {
      std::fprintf(stderr, "message was: %s\n", line.c_str());
      ::_exit(20);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed at step " << WEXITSTATUS(status);
}

INSTANTIATE_TEST_SUITE_P(Filters, BackendChoice,
                         ::testing::Values(FilterCase{"eperm", EPERM, true},
                                           FilterCase{"enosys", ENOSYS, true},
                                           FilterCase{"emfile", EMFILE, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace ucp
