// BufferedReader and write_frame over a real loopback TCP connection, on both backends and both
// read paths (multishot receive into the loop's buffers, single reads). The peer is a plain
// socket the test writes in pieces, each piece sent only once the connection has read the one
// before, so that a delimiter, a length prefix or a payload really is split across reads.

#include "ucp/net/Framing.h"

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ucp/coro/WhenAll.h"
#include "ucp/io/Operations.h"
#include "ucp/io/WithTimeout.h"
#include "ucp/net/Socket.h"

#include "Backends.h"
#include "LoopRunner.h"
#include "LoopbackClient.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

struct Mode {
  BackendKind backend;
  uint32_t provided_buffers;  // 0: single reads
};

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  return std::string(test::backend_label(info.param.backend)) +
         (info.param.provided_buffers > 0 ? "_multishot" : "_single");
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

class Framing : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam().backend);
    LoopOptions options;
    options.backend = GetParam().backend;
    options.ring_entries = 64;
    options.provided_buffers_count = GetParam().provided_buffers;
    auto loop = EventLoop::create(options);
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
    auto listener = listen_on(*InetAddress::parse("127.0.0.1", 0), {});
    ASSERT_TRUE(listener);
    auto peer = test::connect_loopback(InetAddress::local_of(listener->get())->port());
    ASSERT_TRUE(peer);
    peer_ = std::move(*peer);
    UniqueFd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    ASSERT_TRUE(accepted.valid());
    conn_ = std::make_unique<TcpConnection>(*loop_, std::move(accepted), InetAddress{}, 0);
  }

  /// Runs `body`, then closes the connection, all on the loop.
  void run(Task<> body) {
    test::run_to_end(*loop_, [](TcpConnection& conn, Task<> inner) -> Task<> {
      co_await std::move(inner);
      co_await conn.close();
    }(*conn_, std::move(body)));
  }

  /// Sends `bytes` from the peer (the reader may take them in any number of reads).
  void send(std::string_view bytes) {
    EXPECT_TRUE(test::send_text(peer_.get(), bytes));
    sent_ += bytes.size();
  }
  /// Sends `piece`, then waits (bounded) until the connection has read everything sent so far:
  /// the next piece can only arrive in a later read. For a reader that runs meanwhile.
  Task<> send_piece(std::string_view piece) {
    send(piece);
    for (int i = 0; i < 5000 && conn_->bytes_read() < sent_; ++i) {
      (void)co_await io::sleep_for(*loop_, 1ms);
    }
    EXPECT_EQ(conn_->bytes_read(), sent_) << "the connection did not read the piece";
  }

  std::unique_ptr<EventLoop> loop_;
  UniqueFd peer_;
  std::unique_ptr<TcpConnection> conn_;
  size_t sent_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Modes, Framing,
                         ::testing::Values(Mode{BackendKind::kIoUring, 16},
                                           Mode{BackendKind::kIoUring, 0},
                                           Mode{BackendKind::kEpoll, 16},
                                           Mode{BackendKind::kEpoll, 0}),
                         mode_name);

TEST_P(Framing, ReadUntilFindsADelimiterSplitAcrossReads) {
  std::string first, second;
  bool second_was_buffered = false;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    auto feed = [&]() -> Task<> {
      co_await send_piece("8=FIX.4.4|35=A|\r");  // the delimiter's first byte ends this read
      co_await send_piece("\n8=FIX.4.4|35=0|\r\n");
    };
    auto read = [&]() -> Task<> {
      auto line = co_await reader.read_until("\r\n", 256);
      EXPECT_TRUE(line) << line.error().message();
      if (line) first = std::string(*line);
      auto next = reader.read_until("\r\n", 256);
      second_was_buffered = next.await_ready();
      auto line2 = co_await next;
      if (line2) second = std::string(*line2);
    };
    co_await when_all(read(), feed());
  }());
  EXPECT_EQ(first, "8=FIX.4.4|35=A|\r\n");
  EXPECT_EQ(second, "8=FIX.4.4|35=0|\r\n");
  // The second line came in the read that ended the first: the reader had it already.
  EXPECT_TRUE(second_was_buffered);
}

TEST_P(Framing, MessagesAlreadyReadComeBackWithoutSuspending) {
  std::vector<std::string> lines;
  std::vector<bool> ready;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    send("one\ntwo\nthree\n");
    for (int i = 0; i < 3; ++i) {
      auto op = reader.read_until("\n", 64);
      ready.push_back(op.await_ready());
      auto line = co_await op;
      if (line) lines.emplace_back(*line);
    }
  }());
  EXPECT_EQ(lines, (std::vector<std::string>{"one\n", "two\n", "three\n"}));
  // The first call reads the stream; the bytes of the other two are in the reader already.
  EXPECT_EQ(ready, (std::vector<bool>{false, true, true}));
}

TEST_P(Framing, ReadExactGathersShortReads) {
  std::string into_view, into_buffer;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    auto feed = [&]() -> Task<> {
      for (const char* piece : {"ab", "c", "defg", "hij", "0123456789"}) co_await send_piece(piece);
    };
    auto read = [&]() -> Task<> {
      auto ten = co_await reader.read_exact(10);
      EXPECT_TRUE(ten) << ten.error().message();
      if (ten) into_view = text_of(*ten);
      char buffer[10];
      auto filled = co_await reader.read_exact(std::as_writable_bytes(std::span(buffer)));
      EXPECT_TRUE(filled) << filled.error().message();
      if (filled) into_buffer.assign(buffer, sizeof buffer);
    };
    co_await when_all(read(), feed());
  }());
  EXPECT_EQ(into_view, "abcdefghij");
  EXPECT_EQ(into_buffer, "0123456789");
}

TEST_P(Framing, LengthPrefixedFramesSplitAnywhere) {
  std::vector<std::string> payloads;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    auto feed = [&]() -> Task<> {
      using namespace std::string_literals;
      co_await send_piece("\x00"s);        // half the 16-bit prefix
      co_await send_piece("\x05hel"s);     // the rest of it, part of the payload
      co_await send_piece("lo\x00\x00"s);  // an empty frame follows at once
      co_await send_piece(
          "\x00\x03"s
          "abc"s);  // then one more
    };
    auto read = [&]() -> Task<> {
      const FrameFormat format{LengthPrefix::kBig16, 100};
      for (int i = 0; i < 3; ++i) {
        auto frame = co_await reader.read_frame(format);
        EXPECT_TRUE(frame) << frame.error().message();
        if (frame) payloads.push_back(text_of(*frame));
      }
    };
    co_await when_all(read(), feed());
  }());
  EXPECT_EQ(payloads, (std::vector<std::string>{"hello", "", "abc"}));
}

TEST_P(Framing, WriteFrameSendsTheLengthThenThePayload) {
  std::string payload(70000, 'x');
  Result<void> written, too_long_16, too_long_max;
  run([&]() -> Task<> {
    written = co_await write_frame(*conn_, FrameFormat{LengthPrefix::kBig32, 100000}, payload);
    too_long_16 = co_await write_frame(*conn_, FrameFormat{LengthPrefix::kBig16, 100000}, payload);
    too_long_max = co_await write_frame(*conn_, FrameFormat{LengthPrefix::kBig32, 1000}, payload);
    (void)co_await write_frame(*conn_, FrameFormat{LengthPrefix::kBig16, 10}, "end");
  }());
  EXPECT_TRUE(written) << written.error().message();
  EXPECT_EQ(too_long_16.error(), FramingErrc::kTooLong);
  EXPECT_EQ(too_long_max.error(), FramingErrc::kTooLong);
  std::string received(4 + payload.size() + 2 + 3, '\0');
  ASSERT_TRUE(test::recv_exact(peer_.get(), received));
  EXPECT_EQ(received.substr(0, 4), std::string("\x00\x01\x11\x70", 4));  // 70000, big-endian
  EXPECT_EQ(received.substr(4, payload.size()), payload);
  EXPECT_EQ(received.substr(4 + payload.size()), std::string("\x00\x03"
                                                             "end",
                                                             5))
      << "the refused frames sent nothing";
}

TEST_P(Framing, AnOversizedFrameOrLineIsRefusedBeforeItsBytes) {
  Result<std::span<const std::byte>> frame = std::span<const std::byte>();
  Result<std::string_view> line = std::string_view();
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    send(std::string("\x00\x00\x07\xd0", 4));  // 2000 bytes announced
    frame = co_await reader.read_frame(FrameFormat{LengthPrefix::kBig32, 1000});
    BufferedReader lines(*conn_);
    send(std::string(100, 'a'));
    line = co_await lines.read_until("\n", 64);
  }());
  EXPECT_EQ(frame.error(), FramingErrc::kTooLong);
  EXPECT_EQ(line.error(), FramingErrc::kTooLong);
}

TEST_P(Framing, EndOfStreamBetweenMessagesAndInsideOne) {
  std::string whole;
  std::error_code at_boundary, inside;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    send(
        std::string("\x00\x02ok\x00\x0a"
                    "abc",
                    9));  // a frame, then 3 of 10
    ::shutdown(peer_.get(), SHUT_WR);
    const FrameFormat format{LengthPrefix::kBig16, 100};
    auto first = co_await reader.read_frame(format);
    if (first) whole = text_of(*first);
    auto cut = co_await reader.read_frame(format);
    inside = cut.error();
    auto after = co_await reader.read_frame(format);
    at_boundary = after.error();  // the truncated bytes are still there: truncated again
  }());
  EXPECT_EQ(whole, "ok");
  EXPECT_EQ(inside, FramingErrc::kTruncated);
  EXPECT_EQ(at_boundary, FramingErrc::kTruncated);
}

TEST_P(Framing, ACleanEndIsEndOfStream) {
  std::error_code end, exact_end;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    send("line\n");
    ::shutdown(peer_.get(), SHUT_WR);
    (void)co_await reader.read_until("\n", 64);
    end = (co_await reader.read_until("\n", 64)).error();
    char buffer[4];
    exact_end = (co_await reader.read_exact(std::as_writable_bytes(std::span(buffer)))).error();
  }());
  EXPECT_EQ(end, FramingErrc::kEndOfStream);
  EXPECT_EQ(exact_end, FramingErrc::kEndOfStream);
}

TEST_P(Framing, ATimedOutReadKeepsWhatItHad) {
  std::error_code timed;
  std::string payload;
  run([&]() -> Task<> {
    BufferedReader reader(*conn_);
    const FrameFormat format{LengthPrefix::kBig32, 100};
    send(std::string("\x00\x00\x00\x05he", 6));
    auto first = co_await with_timeout(reader.read_frame(format), 50ms);
    timed = first.error();
    send("llo");
    auto second = co_await with_timeout(reader.read_frame(format), 5s);
    EXPECT_TRUE(second) << second.error().message();
    if (second) payload = text_of(*second);
  }());
  EXPECT_EQ(timed, std::errc::timed_out);
  EXPECT_EQ(payload, "hello");
}

}  // namespace
}  // namespace ucp
