// TcpConnection's output path over real loopback sockets, through the public TcpServer API:
// write() (buffered, bounded by max_output_bytes) and write_all() sharing one queue, the
// flush in close(), and what a peer that never reads or resets costs. Handlers run on the
// worker thread and report through atomics; every wait is bounded.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/memory/MemoryPool.h"
#include "ucp/net/TcpServer.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopbackClient.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSmallLimit = 64 * 1024;  // max_output_bytes where a test wants it reached

class WriteServer {
 public:
  WriteServer(BackendKind backend, TcpServer::Handler handler, uint64_t max_output_bytes,
              uint32_t shutdown_timeout_ms = 3000, uint32_t write_timeout_ms = 0) {
    ServerOptions options;
    options.ip = "127.0.0.1";
    options.port = 0;
    options.thread_num = 1;
    options.read_timeout_ms = 10000;
    options.shutdown_timeout_ms = shutdown_timeout_ms;
    options.max_output_bytes = max_output_bytes;
    options.write_timeout_ms = write_timeout_ms;
    LoopOptions loop;
    loop.backend = backend;
    loop.ring_entries = 256;
    server_ = std::make_unique<TcpServer>(options, loop, std::move(handler));
    std::string error = test::error_text(server_->start());
    EXPECT_EQ(error, "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~WriteServer() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  uint16_t port() const { return server_->local_address().port(); }
  TcpServer& server() { return *server_; }

 private:
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
};

UniqueFd connect_client(uint16_t port, int receive_buffer = 0) {
  auto fd = test::connect_loopback(port, 5000, receive_buffer);
  EXPECT_TRUE(fd) << fd.error().message();
  if (!fd) return UniqueFd();
  return std::move(*fd);
}

struct Received {
  std::string data;
  std::error_code end;  // empty: orderly EOF
};

Received receive_until_closed(int fd, int64_t timeout_ms = 30000) {
  const test::Deadline deadline(timeout_ms);
  Received received;
  std::vector<char> buffer(65536);
  for (;;) {
    auto n = test::recv_some(fd, buffer, deadline.remaining_ms());
    if (!n) {
      received.end = n.error();
      return received;
    }
    if (*n == 0) return received;
    received.data.append(buffer.data(), *n);
  }
}

std::string pattern(uint64_t seed, size_t size, uint64_t offset = 0) {
  std::string out(size, '\0');
  test::fill_pattern(out, seed, offset);
  return out;
}

// Keeps the kernel's share small, so bytes pile up in the connection's own queue.
void shrink_send_buffer(TcpConnection& connection) {
  int bytes = 16384;
  ::setsockopt(connection.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

// Polls `done` every 10 ms for at most `timeout`.
template <class Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds timeout = 15s) {
  auto end = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// Every test runs on io_uring and on epoll.
class TcpConnectionWrite : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Backends, TcpConnectionWrite, test::kAllBackends, test::backend_name);

// ---- byte order across write() and write_all(), from two coroutines ----

struct Piece {
  int writer;
  int index;
  size_t size;
};

struct OrderState {
  std::mutex mutex;
  std::vector<Piece> calls;  // in call order
  std::atomic<int> failures{0};
};

// Writes `sizes` alternating write() and write_all(), each from a scratch buffer that is
// overwritten as soon as the call returns: a queue that kept pointing into it would send
// garbage.
Task<> write_pieces(TcpConnection& connection, OrderState& state, int writer,
                    std::vector<size_t> sizes, bool start_with_write_all, bool& done) {
  std::vector<char> scratch;
  for (int index = 0; index < static_cast<int>(sizes.size()); ++index) {
    size_t size = sizes[static_cast<size_t>(index)];
    scratch.resize(size);
    test::fill_pattern(scratch, static_cast<uint64_t>(writer * 100 + index));
    {
      std::lock_guard lock(state.mutex);
      state.calls.push_back({writer, index, size});
    }
    bool write_all = (index % 2 == 0) == start_with_write_all;
    auto written = write_all ? co_await connection.write_all(std::span<const char>(scratch))
                             : co_await connection.write(std::span<const char>(scratch));
    if (!written) ++state.failures;
    std::fill(scratch.begin(), scratch.end(), '\xee');
  }
  done = true;
}

Task<> two_interleaved_writers(TcpConnection& connection, OrderState& state) {
  // Named vectors: g++ 12 rejects a braced list as a coroutine call's argument here.
  std::vector<size_t> second_sizes = {13, 65536, 1, 200000, 4096, 70000};
  std::vector<size_t> first_sizes = {1, 7, 100, 5000, 70000, 3, 300000, 8176, 8177, size_t{1} << 20,
                                     2};
  bool second_done = false;
  connection.loop().spawn(write_pieces(connection, state, 2, std::move(second_sizes),
                                       /*start_with_write_all=*/true, second_done));
  bool first_done = false;
  co_await write_pieces(connection, state, 1, std::move(first_sizes),
                        /*start_with_write_all=*/false, first_done);
  for (int i = 0; i < 20000 && !second_done; ++i) {
    co_await io::sleep_for(connection.loop(), 1ms);
  }
}

TEST_P(TcpConnectionWrite, InterleavedWriteAndWriteAllArriveInCallOrder) {
  OrderState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return two_interleaved_writers(c, state); },
      kSmallLimit);
  UniqueFd client = connect_client(server.port());
  ASSERT_TRUE(client);
  Received received = receive_until_closed(client.get());
  EXPECT_FALSE(received.end) << received.end.message();
  std::string expected;
  {
    std::lock_guard lock(state.mutex);
    ASSERT_EQ(state.calls.size(), 17u);
    bool first_seen = false, interleaved = false;
    for (const Piece& piece : state.calls) {
      expected += pattern(static_cast<uint64_t>(piece.writer * 100 + piece.index), piece.size);
      first_seen = first_seen || piece.writer == 1;
      interleaved = interleaved || (first_seen && piece.writer == 2);
    }
    EXPECT_TRUE(interleaved) << "the two writers never took turns: nothing was tested";
  }
  EXPECT_EQ(state.failures.load(), 0);
  ASSERT_EQ(received.data.size(), expected.size());
  auto mismatch = std::mismatch(received.data.begin(), received.data.end(), expected.begin());
  EXPECT_TRUE(mismatch.first == received.data.end())
      << "first wrong byte at offset " << (mismatch.first - received.data.begin());
}

// ---- many small writes: coalesced into few sends, every byte delivered ----

struct CoalesceState {
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> sends{0};
  std::atomic<bool> drained{false};
};

const std::vector<size_t> kMessageSizes = {1, 100, 4096, 8177, 65536, size_t{1} << 20};

Task<> many_small_writes(TcpConnection& connection, CoalesceState& state) {
  uint64_t writes = 0;
  for (size_t size : kMessageSizes) {
    std::string message = pattern(size, size);
    size_t piece = size <= 65536 ? 1 : 7;
    for (size_t offset = 0; offset < size; offset += piece) {
      size_t n = std::min(piece, size - offset);
      if (!co_await connection.write(std::span<const char>(message.data() + offset, n))) {
        co_return;
      }
      ++writes;
    }
  }
  state.writes = writes;
  for (int i = 0; i < 30000 && connection.queued_output_bytes() > 0; ++i) {
    co_await io::sleep_for(connection.loop(), 1ms);
  }
  state.sends = connection.sends_submitted();
  state.drained = connection.queued_output_bytes() == 0;
}

TEST_P(TcpConnectionWrite, ManySmallWritesCoalesceIntoFewSendsAndAllArrive) {
  CoalesceState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return many_small_writes(c, state); },
      /*max_output_bytes=*/4194304);
  UniqueFd client = connect_client(server.port());
  ASSERT_TRUE(client);
  Received received = receive_until_closed(client.get());
  EXPECT_FALSE(received.end) << received.end.message();
  std::string expected;
  for (size_t size : kMessageSizes) expected += pattern(size, size);
  ASSERT_EQ(received.data.size(), expected.size());
  EXPECT_TRUE(received.data == expected);
  ASSERT_TRUE(state.drained.load());
  std::printf("[ figure ] %llu writes went out in %llu sends\n",
              static_cast<unsigned long long>(state.writes.load()),
              static_cast<unsigned long long>(state.sends.load()));
  EXPECT_GT(state.writes.load(), 150000u);
  EXPECT_LT(state.sends.load() * 100, state.writes.load());  // at least 100 writes per send
}

// ---- a peer that never reads: write() suspends at max_output_bytes, then resumes ----

struct BoundedState {
  static constexpr size_t kWrites = 2048;
  static constexpr size_t kPiece = 4096;
  std::atomic<size_t> completed{0};
  std::atomic<bool> in_write{false};
  std::atomic<size_t> queued_before_write{0};
  std::atomic<size_t> most_queued_after_write{0};
  std::atomic<int> failures{0};
};

Task<> write_until_told(TcpConnection& connection, BoundedState& state) {
  shrink_send_buffer(connection);
  std::string piece(BoundedState::kPiece, '\0');
  for (size_t i = 0; i < BoundedState::kWrites; ++i) {
    test::fill_pattern(piece, 42, i * BoundedState::kPiece);
    state.queued_before_write = connection.queued_output_bytes();
    state.in_write = true;
    auto written = co_await connection.write(std::span<const char>(piece));
    state.in_write = false;
    if (!written) {
      ++state.failures;
      co_return;
    }
    size_t queued = connection.queued_output_bytes();
    if (queued > state.most_queued_after_write) state.most_queued_after_write = queued;
    state.completed = i + 1;
  }
}

TEST_P(TcpConnectionWrite, WriteSuspendsPastMaxOutputBytesAndResumesWhenThePeerReads) {
  BoundedState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_until_told(c, state); }, kSmallLimit);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  // Not reading: the writer must stop making progress, suspended inside write().
  size_t last = ~size_t{0};
  int unchanged = 0;
  ASSERT_TRUE(wait_until([&] {
    size_t now = state.completed.load();
    unchanged = (now == last && state.in_write.load()) ? unchanged + 1 : 0;
    last = now;
    return unchanged >= 30;  // 300 ms without a completed write
  })) << "the writer never stalled";
  size_t stalled_at = state.completed.load();
  std::printf("[ figure ] writer stalled after %zu KiB; queue %zu bytes before the waiting write\n",
              stalled_at * BoundedState::kPiece / 1024, state.queued_before_write.load());
  EXPECT_LT(stalled_at, BoundedState::kWrites);
  EXPECT_GT(state.queued_before_write.load() + BoundedState::kPiece, kSmallLimit)
      << "write() suspended before the queue reached max_output_bytes";
  EXPECT_LE(state.most_queued_after_write.load(), kSmallLimit);

  // Now read: the writer resumes and every byte arrives in order.
  Received received = receive_until_closed(client.get());
  EXPECT_FALSE(received.end) << received.end.message();
  ASSERT_EQ(received.data.size(), BoundedState::kWrites * BoundedState::kPiece);
  EXPECT_EQ(test::first_pattern_mismatch(received.data, 42), std::string::npos);
  EXPECT_EQ(state.completed.load(), BoundedState::kWrites);
  EXPECT_EQ(state.failures.load(), 0);
  EXPECT_LE(state.most_queued_after_write.load(), kSmallLimit);
}

// ---- write() then return at once: close() flushes before the FIN ----

struct ReturnState {
  std::atomic<size_t> queued_at_return{0};
};

constexpr size_t kFlushBytes = 2 * 1024 * 1024;

Task<> write_and_return(TcpConnection& connection, ReturnState& state) {
  shrink_send_buffer(connection);
  std::string piece(65536, '\0');
  for (size_t offset = 0; offset < kFlushBytes; offset += piece.size()) {
    test::fill_pattern(piece, 7, offset);
    if (!co_await connection.write(std::span<const char>(piece))) co_return;
  }
  state.queued_at_return = connection.queued_output_bytes();
}

TEST_P(TcpConnectionWrite, HandlerThatWritesAndReturnsAtOnceDeliversEverythingBeforeEof) {
  ReturnState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_and_return(c, state); },
      /*max_output_bytes=*/4194304);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  ASSERT_TRUE(wait_until([&] { return state.queued_at_return.load() > 0; }));
  std::this_thread::sleep_for(200ms);  // the handler is gone; close() holds the bytes
  Received received = receive_until_closed(client.get());
  EXPECT_FALSE(received.end) << received.end.message();  // EOF, not a reset
  ASSERT_EQ(received.data.size(), kFlushBytes);
  EXPECT_EQ(test::first_pattern_mismatch(received.data, 7), std::string::npos);
}

// ---- shutdown_write(): the FIN follows the queued bytes ----

struct HalfCloseState {
  std::atomic<bool> write_after_shutdown_refused{false};
};

Task<> write_then_half_close(TcpConnection& connection, HalfCloseState& state) {
  shrink_send_buffer(connection);
  std::string data = pattern(9, 262144);
  if (!co_await connection.write(std::span<const char>(data))) co_return;
  connection.shutdown_write();
  auto late = co_await connection.write(std::span<const char>(data.data(), 1));
  state.write_after_shutdown_refused = !late && late.error() == std::errc::broken_pipe;
  char byte;
  (void)co_await connection.read(std::span<char>(&byte, 1));  // until the peer closes
}

TEST_P(TcpConnectionWrite, ShutdownWriteSendsFinAfterTheQueuedBytes) {
  HalfCloseState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_then_half_close(c, state); },
      kSmallLimit);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  std::this_thread::sleep_for(100ms);
  Received received = receive_until_closed(client.get());  // EOF: the server's FIN
  EXPECT_FALSE(received.end) << received.end.message();
  EXPECT_TRUE(received.data == pattern(9, 262144));
  EXPECT_TRUE(state.write_after_shutdown_refused.load());
}

// ---- the peer resets while bytes are queued ----

struct ResetState {
  std::atomic<size_t> completed{0};
  std::atomic<bool> in_write{false};
  std::atomic<bool> done{false};
  std::error_code first_error;  // written before `done`
  std::error_code next_error;
  size_t queued_after_error = 1;
  long long pool_blocks_leaked = -1;
};

Task<> write_until_reset(TcpConnection& connection, ResetState& state) {
  shrink_send_buffer(connection);
  const long long blocks_before = MemoryPool::thread_stats().outstanding;
  std::string piece = pattern(3, 4096);
  for (size_t i = 0; i < 1000000; ++i) {
    state.in_write = true;
    auto written = co_await connection.write(std::span<const char>(piece));
    state.in_write = false;
    if (!written) {
      state.first_error = written.error();
      break;
    }
    state.completed = i + 1;
  }
  auto again = co_await connection.write(std::span<const char>(piece));
  if (!again) state.next_error = again.error();
  state.queued_after_error = connection.queued_output_bytes();
  state.pool_blocks_leaked = MemoryPool::thread_stats().outstanding - blocks_before;
  state.done = true;
}

TEST_P(TcpConnectionWrite, PeerResetWithBytesQueuedFailsLaterWritesAndFreesTheQueue) {
  ResetState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_until_reset(c, state); }, kSmallLimit);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  size_t last = ~size_t{0};
  int unchanged = 0;
  ASSERT_TRUE(wait_until([&] {
    size_t now = state.completed.load();
    unchanged = (now == last && state.in_write.load()) ? unchanged + 1 : 0;
    last = now;
    return unchanged >= 20;
  }));
  test::set_reset_on_close(client.get());
  client.reset();  // RST while the server's queue is full
  ASSERT_TRUE(wait_until([&] { return state.done.load(); }));
  EXPECT_TRUE(state.first_error == std::errc::connection_reset ||
              state.first_error == std::errc::broken_pipe)
      << state.first_error.message();
  EXPECT_EQ(state.next_error, state.first_error);  // later writes get the same error at once
  EXPECT_EQ(state.queued_after_error, 0u);
  EXPECT_EQ(state.pool_blocks_leaked, 0);
  EXPECT_TRUE(wait_until([&] { return server.server().connection_count() == 0; }));
}

// ---- close() with a peer that never reads: bounded by shutdown_timeout_ms ----

struct AbandonState {
  std::atomic<bool> returned{false};
  std::atomic<size_t> queued_at_return{0};
};

Task<> write_much_and_return(TcpConnection& connection, AbandonState& state) {
  shrink_send_buffer(connection);
  std::string data = pattern(5, 1 << 20);
  if (co_await connection.write(std::span<const char>(data))) {
    state.queued_at_return = connection.queued_output_bytes();
  }
  state.returned = true;
}

TEST_P(TcpConnectionWrite, CloseGivesUpOnAPeerThatNeverReadsAfterTheFlushTimeout) {
  constexpr uint32_t kFlushTimeoutMs = 300;
  AbandonState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_much_and_return(c, state); },
      /*max_output_bytes=*/4194304, /*shutdown_timeout_ms=*/kFlushTimeoutMs);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  ASSERT_TRUE(wait_until([&] { return state.returned.load(); }));
  auto returned = Clock::now();
  EXPECT_GT(state.queued_at_return.load(), 0u);
  // Bounded wait for correctness: the connection must close although nothing is read.
  EXPECT_TRUE(wait_until([&] { return server.server().connection_count() == 0; }, 10s))
      << "close() is still flushing to a peer that never reads";
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - returned);
  std::printf("[ figure ] close() gave up %lld ms after the handler returned (timeout %u ms)\n",
              static_cast<long long>(waited.count()), kFlushTimeoutMs);
}

// ---- write deadline: a peer that stops taking its output is cut off ----

struct StalledState {
  std::atomic<int> write_error{0};  // errc value; 0 = none yet
  std::atomic<int> read_error{0};
  std::atomic<bool> done{false};
};

constexpr size_t kStalledBytes = 2 << 20;

// Writes 2 MiB with write_all (never copied: the writer waits for the peer), then reads.
Task<> write_all_then_read(TcpConnection& connection, StalledState& state) {
  shrink_send_buffer(connection);
  std::string data = pattern(13, kStalledBytes);
  auto written = co_await connection.write_all(std::span<const char>(data));
  if (!written) state.write_error = written.error().value();
  char byte;
  auto n = co_await connection.read(std::span<char>(&byte, 1));
  if (!n) state.read_error = n.error().value();
  state.done = true;
}

TEST_P(TcpConnectionWrite, WriteTimeoutEndsAWriterWhosePeerNeverReadsAndItsReads) {
  StalledState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_all_then_read(c, state); },
      /*max_output_bytes=*/4194304, /*shutdown_timeout_ms=*/3000,
      /*write_timeout_ms=*/300);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  // Bounded wait for correctness, not for speed: the writer must be released.
  ASSERT_TRUE(wait_until([&] { return state.done.load(); }, 10s)) << "write_all still waits";
  EXPECT_EQ(state.write_error.load(), static_cast<int>(std::errc::timed_out));
  EXPECT_EQ(state.read_error.load(), static_cast<int>(std::errc::timed_out));
  EXPECT_TRUE(wait_until([&] { return server.server().connection_count() == 0; }));
  // The server still serves: a reading peer gets everything.
  StalledState second;
  WriteServer patient(
      GetParam(), [&second](TcpConnection& c) { return write_all_then_read(c, second); }, 4194304,
      3000, /*write_timeout_ms=*/300);
  UniqueFd reader = connect_client(patient.port());
  std::string all;
  std::vector<char> buffer(1 << 16);
  while (all.size() < kStalledBytes) {
    auto n = test::recv_some(reader.get(), buffer, 10000);
    if (!n || *n == 0) break;
    all.append(buffer.data(), *n);
  }
  EXPECT_EQ(all.size(), kStalledBytes);
  EXPECT_EQ(second.write_error.load(), 0);
}

TEST_P(TcpConnectionWrite, SlowButSteadyReaderIsNeverCutOffByTheWriteTimeout) {
  StalledState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_all_then_read(c, state); },
      /*max_output_bytes=*/4194304, /*shutdown_timeout_ms=*/3000,
      /*write_timeout_ms=*/1000);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  // Taken in small steps, 16 KiB every 20 ms (2.5 s for the 2 MiB, several deadlines long):
  // slow, but never a second without a byte, however loaded the machine.
  std::string all;
  std::vector<char> buffer(16384);
  while (all.size() < kStalledBytes) {
    std::this_thread::sleep_for(20ms);
    auto n = test::recv_some(client.get(), buffer, 10000);
    if (!n || *n == 0) break;
    all.append(buffer.data(), *n);
  }
  EXPECT_EQ(all.size(), kStalledBytes);
  EXPECT_EQ(state.write_error.load(), 0);
}

// ---- cancelling writes ----

struct CancelState {
  std::atomic<int> queued_write_error{0};
  std::atomic<bool> deadline_passed{false};
  std::atomic<bool> done{false};
};

constexpr size_t kBigWrite = 1 << 20;

// A big write_all from a second coroutine fills the socket; a small write_all queued behind it
// is abandoned by its deadline before any of its bytes reached a send: it leaves the queue
// cleanly, and the connection goes on.
Task<> big_write(TcpConnection& connection, bool& finished) {
  std::string big = pattern(21, kBigWrite);
  (void)co_await connection.write_all(std::span<const char>(big));
  finished = true;
}

Task<> cancel_a_queued_write(TcpConnection& connection, CancelState& state) {
  shrink_send_buffer(connection);
  bool big_done = false;
  connection.loop().spawn(big_write(connection, big_done));
  co_await io::sleep_for(connection.loop(), 5ms);  // the big write is on its way and stuck
  // Due after the small write's deadline (timers of one loop fire in order): tells the client
  // when it may start reading.
  connection.loop().spawn([](EventLoop& loop, CancelState& s) -> Task<> {
    co_await io::sleep_for(loop, 100ms);
    s.deadline_passed = true;
  }(connection.loop(), state));
  std::string never = "NEVER SENT";
  auto r = co_await with_timeout(connection.write_all(std::span<const char>(never)), 50ms);
  if (!r) state.queued_write_error = r.error().value();
  std::string tail = "tail";
  (void)co_await connection.write_all(std::span<const char>(tail));
  while (!big_done) co_await io::sleep_for(connection.loop(), 1ms);
  state.done = true;
}

TEST_P(TcpConnectionWrite, ACancelledWriteThatHasNotStartedLeavesTheStreamIntact) {
  CancelState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return cancel_a_queued_write(c, state); },
      /*max_output_bytes=*/4194304);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  // Nobody reads until the small write's deadline has passed. (Its result may come only later:
  // a send in flight that covers it decides when it ends.)
  ASSERT_TRUE(wait_until([&] { return state.deadline_passed.load(); }));
  Received received = receive_until_closed(client.get());
  EXPECT_EQ(state.queued_write_error.load(), static_cast<int>(std::errc::timed_out));
  ASSERT_EQ(received.data.size(), kBigWrite + 4);
  EXPECT_TRUE(received.data.substr(0, kBigWrite) == pattern(21, kBigWrite));
  EXPECT_EQ(received.data.substr(kBigWrite), "tail");
  EXPECT_TRUE(state.done.load());
}

// A write already partly sent cannot be taken back without cutting the stream: cancelling it
// fails the connection's output, and later writes report that.
Task<> cancel_a_write_on_its_way(TcpConnection& connection, CancelState& state) {
  shrink_send_buffer(connection);
  std::string big = pattern(22, kBigWrite);
  auto r = co_await with_timeout(connection.write_all(std::span<const char>(big)), 50ms);
  if (!r) state.queued_write_error = r.error().value();
  std::string more = "more";
  auto later = co_await connection.write(std::span<const char>(more));
  state.done = !later && later.error() == std::errc::operation_canceled;
}

TEST_P(TcpConnectionWrite, ACancelledWritePartlySentFailsTheOutput) {
  CancelState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return cancel_a_write_on_its_way(c, state); },
      /*max_output_bytes=*/4194304);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  ASSERT_TRUE(wait_until([&] { return state.queued_write_error.load() != 0; }));
  EXPECT_EQ(state.queued_write_error.load(), static_cast<int>(std::errc::timed_out));
  Received received = receive_until_closed(client.get());
  EXPECT_LT(received.data.size(), kBigWrite);  // cut: never the whole write
  EXPECT_TRUE(state.done.load());
}

// ---- graceful stop: buffered output is still delivered ----

struct StopState {
  std::atomic<bool> written{false};
};

constexpr size_t kStopBytes = 1 << 20;

Task<> write_then_wait_for_stop(TcpConnection& connection, StopState& state) {
  shrink_send_buffer(connection);
  std::string data = pattern(11, kStopBytes);
  for (size_t offset = 0; offset < data.size(); offset += 16384) {
    if (!co_await connection.write(std::span<const char>(data.data() + offset, 16384))) co_return;
  }
  state.written = true;
  char byte;
  (void)co_await connection.read(std::span<char>(&byte, 1));  // ends with the stop
}

TEST_P(TcpConnectionWrite, GracefulStopStillDeliversBufferedWrites) {
  StopState state;
  WriteServer server(
      GetParam(), [&state](TcpConnection& c) { return write_then_wait_for_stop(c, state); },
      /*max_output_bytes=*/4194304, /*shutdown_timeout_ms=*/5000);
  UniqueFd client = connect_client(server.port(), /*receive_buffer=*/16384);
  ASSERT_TRUE(client);
  ASSERT_TRUE(wait_until([&] { return state.written.load(); }));
  std::thread stopper([&] { server.stop(); });  // returns once the connection is closed
  std::this_thread::sleep_for(100ms);
  Received received = receive_until_closed(client.get());
  stopper.join();
  EXPECT_FALSE(received.end) << received.end.message();
  ASSERT_EQ(received.data.size(), kStopBytes);
  EXPECT_TRUE(received.data == pattern(11, kStopBytes));
}

}  // namespace
}  // namespace ucp
