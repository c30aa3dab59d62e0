// TcpConnection's input path over real loopback sockets: the receive pauses it makes on its
// own (back-pressure on a multishot receive whose reader is behind) must be invisible to the
// handler. Only a real FIN reads as 0, only a real error as an error, and no byte is lost or
// reordered across a pause, whichever order the pause's completion and the data arrive in.
//
// A "verifying sink" handler checks every byte against the pattern the client sends, acks
// each message with a buffered write() (so it never suspends between receives: a burst of
// chunks is drained within one loop iteration, while the pause's cancel is still in flight),
// and reports the total at EOF.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/coro/WhenAll.h"
#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/Socket.h"
#include "ucp/net/TcpServer.h"

#include "Backends.h"
#include "ErrorText.h"
#include "LoopbackClient.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSeed = 7;

enum class ReadApi { kReceive, kRead };

struct SinkOptions {
  ReadApi api = ReadApi::kReceive;
  size_t ack_every = 0;               // bytes per ack line "ack N\n"; 0 = no acks
  uint32_t stall_after_first_ms = 0;  // sleep after the first chunk: the queue fills meanwhile
};

struct SinkReport {
  std::atomic<int> finished{0};
  std::atomic<uint64_t> total{0};
  std::atomic<int64_t> first_bad{-1};
  std::atomic<int> ended_with_error{0};
  std::atomic<uint64_t> pauses{0};
};

// Consumes one chunk of the stream: checks it against the pattern at `offset`.
void check_chunk(std::span<const std::byte> bytes, uint64_t offset, SinkReport& report) {
  std::span<const char> chars(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t mismatch = test::first_pattern_mismatch(chars, kSeed, offset);
  if (mismatch != std::string::npos && report.first_bad.load() < 0) {
    report.first_bad = static_cast<int64_t>(offset + mismatch);
  }
}

Task<> verifying_sink(TcpConnection& connection, SinkOptions options, SinkReport& report) {
  uint64_t total = 0;
  uint64_t next_ack = options.ack_every;
  std::vector<std::byte> scratch(65536);
  bool stalled = false;
  for (;;) {
    size_t n = 0;
    if (options.api == ReadApi::kReceive) {
      auto data = co_await connection.receive();
      if (!data) {
        report.ended_with_error = 1;
        break;
      }
      n = data->size();
      check_chunk(data->bytes(), total, report);
    } else {
      auto got = co_await connection.read(scratch);
      if (!got) {
        report.ended_with_error = 1;
        break;
      }
      n = *got;
      check_chunk(std::span(scratch.data(), n), total, report);
    }
    if (n == 0) {  // EOF: report the total, then return (close() flushes the line)
      std::string line = "total " + std::to_string(total) + "\n";
      (void)co_await connection.write(std::span<const char>(line));
      break;
    }
    total += n;
    if (!stalled && options.stall_after_first_ms > 0) {
      stalled = true;  // the peer keeps sending: the receive queue fills and pauses
      co_await io::sleep_for(connection.loop(),
                             std::chrono::milliseconds(options.stall_after_first_ms));
    }
    while (options.ack_every > 0 && total >= next_ack) {
      std::string line = "ack " + std::to_string(next_ack) + "\n";
      if (!co_await connection.write(std::span<const char>(line))) break;
      next_ack += options.ack_every;
    }
  }
  report.total = total;
  report.pauses = connection.receive_pauses();
  report.finished = 1;
}

struct ReadParams {
  uint32_t provided_buffers;  // > 0: multishot receive into the loop's buffers; 0: single-shot
  ReadApi api;
  BackendKind backend;
};

void PrintTo(const ReadParams& params, std::ostream* out) {
  *out << params.provided_buffers << " provided buffers, "
       << (params.api == ReadApi::kReceive ? "receive()" : "read()") << ", "
       << test::backend_label(params.backend);
}

std::string param_name(const ::testing::TestParamInfo<ReadParams>& info) {
  return std::string(info.param.provided_buffers > 0 ? "Multishot" : "SingleShot") +
         (info.param.api == ReadApi::kReceive ? "Receive" : "Read") + "_" +
         test::backend_label(info.param.backend);
}

class SinkServer {
 public:
  SinkServer(const ReadParams& params, SinkOptions options) {
    ServerOptions server_options;
    server_options.ip = "127.0.0.1";
    server_options.port = 0;
    server_options.thread_num = 1;
    server_options.read_timeout_ms = 20000;
    LoopOptions loop;
    loop.backend = params.backend;
    loop.ring_entries = 256;
    loop.provided_buffers_count = params.provided_buffers;
    loop.provided_buffer_size = 4096;
    options.api = params.api;
    server_ = std::make_unique<TcpServer>(server_options, loop, [this, options](TcpConnection& c) {
      return verifying_sink(c, options, report_);
    });
    EXPECT_EQ(test::error_text(server_->start()), "");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~SinkServer() {
    server_->stop();
    thread_.join();
  }
  uint16_t port() const { return server_->local_address().port(); }
  SinkReport& report() { return report_; }

 private:
  SinkReport report_;
  std::unique_ptr<TcpServer> server_;
  std::thread thread_;
};

std::string pattern(size_t size, uint64_t offset) {
  std::string out(size, '\0');
  test::fill_pattern(out, kSeed, offset);
  return out;
}

// Reads lines until `expected` arrives (or the connection ends / 10 s pass).
Result<void> expect_line(int fd, std::string& pending, const std::string& expected) {
  const test::Deadline deadline(10000);
  std::vector<char> buffer(4096);
  for (;;) {
    auto newline = pending.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      if (line == expected) return {};
      ADD_FAILURE() << "got line '" << line << "', expected '" << expected << "'";
      return Unexpected{std::errc::protocol_error};
    }
    auto n = test::recv_some(fd, buffer, deadline.remaining_ms());
    if (!n) return Unexpected{n.error()};
    if (*n == 0) return Unexpected{std::errc::connection_aborted};  // EOF before the line
    pending.append(buffer.data(), *n);
  }
}

bool wait_finished(SinkReport& report) {
  for (int i = 0; i < 1000 && report.finished.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  return report.finished.load() != 0;
}

class ReceivePauses : public ::testing::TestWithParam<ReadParams> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam().backend); }
};

INSTANTIATE_TEST_SUITE_P(ReadModes, ReceivePauses,
                         ::testing::Values(ReadParams{256, ReadApi::kReceive,
                                                      BackendKind::kIoUring},
                                           ReadParams{256, ReadApi::kRead, BackendKind::kIoUring},
                                           ReadParams{0, ReadApi::kReceive, BackendKind::kIoUring},
                                           ReadParams{0, ReadApi::kRead, BackendKind::kIoUring},
                                           ReadParams{256, ReadApi::kReceive, BackendKind::kEpoll},
                                           ReadParams{256, ReadApi::kRead, BackendKind::kEpoll},
                                           ReadParams{0, ReadApi::kReceive, BackendKind::kEpoll},
                                           ReadParams{0, ReadApi::kRead, BackendKind::kEpoll}),
                         param_name);

// A burst of many chunks drained at once: the pause's own completion arrives while the
// reader already waits again. It must resume the receive, not end the stream.
TEST_P(ReceivePauses, ReaderWaitingWhenThePauseCompletesGetsEveryMessage) {
  constexpr size_t kMessage = 64 * 1024;
  constexpr int kMessages = 24;
  SinkServer server(GetParam(), SinkOptions{.ack_every = kMessage});
  auto client = test::connect_loopback(server.port());
  ASSERT_TRUE(client) << client.error().message();
  std::string pending;
  for (int i = 0; i < kMessages; ++i) {
    std::string message = pattern(kMessage, uint64_t{kMessage} * static_cast<uint64_t>(i));
    ASSERT_TRUE(test::send_all(client->get(), message)) << "message " << i;
    auto acked = expect_line(client->get(), pending,
                             "ack " + std::to_string(kMessage * static_cast<size_t>(i + 1)));
    ASSERT_TRUE(acked) << "message " << i << ": " << acked.error().message();
  }
  ::shutdown(client->get(), SHUT_WR);
  ASSERT_TRUE(expect_line(client->get(), pending,
                          "total " + std::to_string(kMessage * static_cast<size_t>(kMessages))));
  ASSERT_TRUE(wait_finished(server.report()));
  EXPECT_EQ(server.report().first_bad.load(), -1);
  EXPECT_EQ(server.report().ended_with_error.load(), 0);
  if (GetParam().provided_buffers > 0) {
    EXPECT_GT(server.report().pauses.load(), 0u);  // the pause path really ran
  }
}

// The reader stalls while the peer keeps sending: the pause completes while nobody waits,
// and the next read resumes the receive.
TEST_P(ReceivePauses, ReaderStalledWhenThePauseCompletesGetsEveryByteInOrder) {
  constexpr size_t kBytes = 512 * 1024;
  SinkServer server(GetParam(), SinkOptions{.stall_after_first_ms = 100});
  auto client = test::connect_loopback(server.port());
  ASSERT_TRUE(client) << client.error().message();
  ASSERT_TRUE(test::send_all(client->get(), pattern(kBytes, 0)));
  ::shutdown(client->get(), SHUT_WR);
  std::string pending;
  ASSERT_TRUE(expect_line(client->get(), pending, "total " + std::to_string(kBytes)));
  ASSERT_TRUE(wait_finished(server.report()));
  EXPECT_EQ(server.report().first_bad.load(), -1);
  if (GetParam().provided_buffers > 0) {
    EXPECT_GT(server.report().pauses.load(), 0u);  // the pause path really ran
  }
}

// FIN arrives while the receive is paused: every byte before it is read, then EOF once.
TEST_P(ReceivePauses, FinArrivingWhilePausedIsReadAfterEveryByte) {
  constexpr size_t kBytes = 96 * 1024;
  SinkServer server(GetParam(), SinkOptions{.stall_after_first_ms = 200});
  auto client = test::connect_loopback(server.port());
  ASSERT_TRUE(client) << client.error().message();
  // Small enough for the socket buffers, so the FIN follows at once while the reader stalls.
  ASSERT_TRUE(test::send_all(client->get(), pattern(kBytes, 0)));
  ::shutdown(client->get(), SHUT_WR);
  std::string pending;
  ASSERT_TRUE(expect_line(client->get(), pending, "total " + std::to_string(kBytes)));
  auto rest = test::drain_until_closed(client->get(), 10000);
  ASSERT_TRUE(rest) << rest.error().message();
  EXPECT_EQ(*rest, 0u);  // nothing after the total line: EOF was seen exactly once
  ASSERT_TRUE(wait_finished(server.report()));
  EXPECT_EQ(server.report().first_bad.load(), -1);
  if (GetParam().provided_buffers > 0) {
    EXPECT_GT(server.report().pauses.load(), 0u);  // the pause path really ran
  }
}

// A read abandoned by its deadline leaves the connection intact: what arrives later is there
// for the next read, in order.
struct DeadlineReport {
  std::atomic<int> first_error{0};
  std::atomic<int> finished{0};
};

Task<> read_with_deadline_then_echo(TcpConnection& connection, ReadApi api,
                                    DeadlineReport& report) {
  std::array<std::byte, 64> buffer;
  Result<size_t> first = size_t{0};
  if (api == ReadApi::kReceive) {
    auto data = co_await with_timeout(connection.receive(), 50ms);
    first = data ? Result<size_t>(data->size()) : Result<size_t>(Unexpected{data.error()});
  } else {
    first = co_await with_timeout(connection.read(buffer), 50ms);
  }
  if (!first) report.first_error = first.error().value();
  // The peer sends "ping" once told (by the deadline's effect: nothing) - just read on.
  std::string got;
  while (got.size() < 4) {
    auto n = co_await connection.read(buffer);
    if (!n || *n == 0) break;
    got.append(reinterpret_cast<const char*>(buffer.data()), *n);
  }
  std::string reply = "got " + got + "\n";
  (void)co_await connection.write(std::span<const char>(reply));
  report.finished = 1;
}

TEST_P(ReceivePauses, AReadEndedByItsDeadlineLeavesTheConnectionReadable) {
  DeadlineReport report;
  ServerOptions server_options;
  server_options.ip = "127.0.0.1";
  server_options.port = 0;
  server_options.read_timeout_ms = 10000;
  LoopOptions loop;
  loop.ring_entries = 256;
  loop.provided_buffers_count = GetParam().provided_buffers;
  loop.backend = GetParam().backend;
  const ReadApi api = GetParam().api;
  TcpServer server(server_options, loop, [&report, api](TcpConnection& c) {
    return read_with_deadline_then_echo(c, api, report);
  });
  ASSERT_EQ(test::error_text(server.start()), "");
  std::thread runner([&] { server.run(); });
  {
    auto client = test::connect_loopback(server.local_address().port());
    ASSERT_TRUE(client);
    std::this_thread::sleep_for(150ms);  // past the 50 ms deadline
    ASSERT_TRUE(test::send_all(client->get(), std::string("ping")));
    std::string pending;
    EXPECT_TRUE(expect_line(client->get(), pending, "got ping"));
  }
  server.stop();
  runner.join();
  EXPECT_EQ(report.first_error.load(), static_cast<int>(std::errc::timed_out));
  EXPECT_EQ(report.finished.load(), 1);
}

// A small loop (16 receive buffers) of one backend, and a loopback listener that the tests
// below accept their connections from.
struct LoopWithListener {
  std::unique_ptr<EventLoop> loop;
  UniqueFd listener;
  uint16_t port = 0;

  UniqueFd accept_one() const {
    return UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  }
};

std::optional<LoopWithListener> small_loop_with_listener(BackendKind backend) {
  LoopOptions options;
  options.backend = backend;
  options.ring_entries = 64;
  options.provided_buffers_count = 16;
  auto loop = EventLoop::create(options);
  auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), {});
  if (!loop || !listener) return std::nullopt;
  const uint16_t port = InetAddress::local_of(listener->get())->port();
  return LoopWithListener{std::move(*loop), std::move(*listener), port};
}

// ---- stop_reading() on a reader that news made ready in the same iteration ----

// Two connections of one loop receive in one iteration; the coroutine that runs first stops
// the other connection's reads, whose receive completion has already made its reader ready.
// That reader must resume once (a relay stopping both sides when one ends does this): resuming
// it a second time would run a frame that has moved on, or finished.
TEST(StopReading, AReaderAlreadyMadeReadyByNewsResumesOnce) {
  for (BackendKind backend : {BackendKind::kIoUring, BackendKind::kEpoll}) {
    if (!test::backend_unusable(backend).empty()) continue;
    SCOPED_TRACE(test::backend_label(backend));
    auto setup = small_loop_with_listener(backend);
    ASSERT_TRUE(setup);
    auto& loop = setup->loop;
    auto peer_a = test::connect_loopback(setup->port);
    auto peer_b = test::connect_loopback(setup->port);
    ASSERT_TRUE(peer_a && peer_b);
    TcpConnection a(*loop, setup->accept_one(), InetAddress{}, 0);
    TcpConnection b(*loop, setup->accept_one(), InetAddress{}, 0);
    int resumed_a = 0;
    std::error_code a_result;
    bool done = false;
    auto read_a = [&]() -> Task<> {
      BufferLease lease;
      auto n = co_await a.receive_into(lease);
      ++resumed_a;
      if (!n) a_result = n.error();
    };
    auto read_b_then_stop_a = [&]() -> Task<> {
      BufferLease lease;
      (void)co_await b.receive_into(lease);
      a.stop_reading();  // a's news is in: its reader is ready, not yet resumed
    };
    auto send_both = [&]() -> Task<> {
      co_await io::sleep_for(*loop, 1ms);  // both readers wait by now
      // Both sockets get their bytes before the loop polls again: one iteration sees both.
      EXPECT_TRUE(test::send_text(peer_b->get(), "b"));
      EXPECT_TRUE(test::send_text(peer_a->get(), "a"));
      std::this_thread::sleep_for(20ms);
    };
    // Named: a coroutine lambda's captures live in the lambda object, which must outlive it.
    auto body = [&]() -> Task<> {
      co_await when_all(read_a(), read_b_then_stop_a(), send_both());
      co_await a.close();
      co_await b.close();
      done = true;
      loop->stop();
    };
    auto watchdog = [&]() -> Task<> {
      co_await io::sleep_for(*loop, 10s);
      loop->stop();
    };
    loop->spawn(body());
    loop->spawn(watchdog());
    loop->run();
    EXPECT_TRUE(done);
    EXPECT_EQ(resumed_a, 1);
  }
}

// ---- abandon(): a waiting read ended for good, the connection read by another ----

// A pooled connection handed out at once (http::ConnectionPool::try_take) is read by its next
// user before the abandoned read of the pool's watcher resumes. That read resumes once, with
// operation_canceled, and touches the reader no more: the next read's bytes and its deadline
// are its own.
TEST(AbandonRead, TheNextReaderGetsTheBytesAndItsDeadline) {
  for (BackendKind backend : {BackendKind::kIoUring, BackendKind::kEpoll}) {
    if (!test::backend_unusable(backend).empty()) continue;
    SCOPED_TRACE(test::backend_label(backend));
    auto setup = small_loop_with_listener(backend);
    ASSERT_TRUE(setup);
    auto& loop = setup->loop;
    auto peer = test::connect_loopback(setup->port);
    ASSERT_TRUE(peer);
    TcpConnection connection(*loop, setup->accept_one(), InetAddress{}, 0);
    if (!connection.multishot()) continue;  // abandon() is for multishot reads only
    int abandoned_resumed = 0;
    std::error_code abandoned_result[2];
    std::string next_bytes;
    std::error_code deadline_result;
    bool done = false;
    BufferLease leases[2];
    TcpConnection::ReadAwaiter abandoned[2] = {connection.receive_into(leases[0]),
                                               connection.receive_into(leases[1])};
    // Awaited through a reference (the awaiter stays where abandon() is called on it).
    struct Awaiting {
      TcpConnection::ReadAwaiter& read;
      bool await_ready() const noexcept { return read.await_ready(); }
      bool await_suspend(std::coroutine_handle<> caller) noexcept {
        return read.await_suspend(caller);
      }
      Result<size_t> await_resume() noexcept { return read.await_resume(); }
    };
    auto wait = [&](int i) -> Task<> {
      auto n = co_await Awaiting{abandoned[i]};
      ++abandoned_resumed;
      if (!n) abandoned_result[i] = n.error();
    };
    auto abandon_then_wait = [&]() -> Task<> {
      co_await io::sleep_for(*loop, 1ms);  // the second read waits by now
      EXPECT_TRUE(abandoned[1].abandon());
      // A read waiting on its deadline when the abandoned one resumes: the deadline stays.
      connection.set_read_timeout_ms(100);
      BufferLease lease;
      auto silent = co_await connection.receive_into(lease);
      if (!silent) deadline_result = silent.error();
    };
    auto take_over = [&]() -> Task<> {
      co_await io::sleep_for(*loop, 1ms);  // the first read waits by now
      EXPECT_TRUE(abandoned[0].abandon());
      EXPECT_FALSE(abandoned[0].abandon());  // once
      // Read at once, before the abandoned read resumes: the bytes are this read's.
      EXPECT_TRUE(test::send_text(peer->get(), "x"));
      BufferLease lease;
      auto n = co_await connection.receive_into(lease);
      if (n) next_bytes.assign(lease.chars(), lease.size());
      lease.reset();
      co_await when_all(wait(1), abandon_then_wait());
    };
    auto body = [&]() -> Task<> {
      co_await when_all(wait(0), take_over());
      co_await connection.close();
      done = true;
      loop->stop();
    };
    auto watchdog = [&]() -> Task<> {
      co_await io::sleep_for(*loop, 5s);
      loop->stop();
    };
    loop->spawn(body());
    loop->spawn(watchdog());
    loop->run();
    EXPECT_TRUE(done);
    EXPECT_EQ(abandoned_resumed, 2);
    EXPECT_EQ(abandoned_result[0], std::errc::operation_canceled);
    EXPECT_EQ(abandoned_result[1], std::errc::operation_canceled);
    EXPECT_EQ(next_bytes, "x");
    EXPECT_EQ(deadline_result, std::errc::timed_out);
  }
}

}  // namespace
}  // namespace ucp
