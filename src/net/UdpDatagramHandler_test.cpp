// UdpSocket::on_datagram over loopback, on both backends: each datagram handed to the handler
// from its completion, in order, with its source; the loop's buffers running dry under it;
// the handler closing or destroying its own socket; errors told and the receive going on; the
// calls it refuses. Everything runs on one loop; every wait is bounded in count.

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ucp/io/Operations.h"
#include "ucp/net/UdpMetrics.h"
#include "ucp/net/UdpSocket.h"

#include "Backends.h"
#include "LoopRunner.h"

namespace ucp {
namespace {

using namespace std::chrono_literals;

class UdpDatagramHandler : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { UCP_SKIP_UNLESS_BACKEND_USABLE(GetParam()); }
  // A loop with `buffers` receive buffers of 2 KiB (UdpSocket's room: 2,000 bytes).
  void make_loop(uint32_t buffers) {
    LoopOptions options;
    options.backend = GetParam();
    options.provided_buffers_count = buffers;
    options.provided_buffer_size = 2048;
    auto loop = EventLoop::create(options);
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::move(*loop);
  }
  void run(Task<> body) { test::run_to_end(*loop_, std::move(body)); }
  std::unique_ptr<EventLoop> loop_;
};

INSTANTIATE_TEST_SUITE_P(Backends, UdpDatagramHandler, test::kAllBackends, test::backend_name);

UdpOptions fitting_options(UdpMetrics* metrics = nullptr) {
  UdpOptions options;
  options.max_datagram_bytes = 2000;  // fits a 2 KiB loop buffer: the multishot receive
  options.receive_buffer_bytes = 4 << 20;
  options.metrics = metrics;
  return options;
}

// Datagram i: its 32-bit number, then filler up to `size` bytes.
std::vector<std::byte> numbered(uint32_t i, size_t size) {
  std::vector<std::byte> out(size, std::byte{0x33});
  std::memcpy(out.data(), &i, sizeof i);
  return out;
}
uint32_t number_of(std::span<const std::byte> data) {
  uint32_t i = UINT32_MAX;
  if (data.size() >= sizeof i) std::memcpy(&i, data.data(), sizeof i);
  return i;
}

// Sends datagrams [first, first + count) of `size` bytes from `from` to `to`, 32 per batch.
Task<size_t> send_numbered(UdpSocket& from, const InetAddress& to, uint32_t first, uint32_t count,
                           size_t size) {
  size_t sent = 0;
  for (uint32_t begin = first; begin < first + count; begin += 32) {
    std::vector<std::vector<std::byte>> payloads;
    std::vector<OutgoingDatagram> batch;
    for (uint32_t i = begin; i < std::min(first + count, begin + 32); ++i) {
      payloads.push_back(numbered(i, size));
    }
    for (const auto& p : payloads) batch.emplace_back(std::span<const std::byte>(p), to);
    auto n = co_await from.send_batch(batch);
    if (n) sent += *n;
  }
  co_return sent;
}

Task<> wait_until(EventLoop& l, const bool& condition) {
  for (int i = 0; i < 5000 && !condition; ++i) co_await io::sleep_for(l, 1ms);
}

// 400 datagrams, waiting in the socket before the handler is set, for a loop of 8 buffers: the
// receive runs them dry (a pool block, then multishot again) and still hands every datagram
// over once, in order, from the sender, and counts them into the socket's metrics.
TEST_P(UdpDatagramHandler, HandsEveryDatagramOverInOrderThroughADryPool) {
  ASSERT_NO_FATAL_FAILURE(make_loop(8));
  constexpr uint32_t kCount = 400;
  struct Outcome {
    std::vector<uint32_t> numbers;
    std::vector<size_t> sizes;
    int foreign_sources = 0;
    bool multishot = false;
    size_t sent = 0;
    uint64_t ran_out = 0;
    bool all = false;
  } o;
  UdpMetrics metrics(1);
  run([](EventLoop& l, Outcome& out, UdpMetrics& m) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto receiver = UdpSocket::bind(l, local, fitting_options(&m));
    auto sender = UdpSocket::bind(l, local);
    EXPECT_TRUE(receiver && sender);
    if (!receiver || !sender) co_return;
    out.multishot = (*receiver)->multishot();
    const uint16_t sender_port = (*sender)->local_address().port();
    out.sent = co_await send_numbered(**sender, (*receiver)->local_address(), 0, kCount, 100);
    auto set = (*receiver)->on_datagram([&out, sender_port](const DatagramRef& d) {
      out.numbers.push_back(number_of(d.data));
      out.sizes.push_back(d.data.size());
      const InetAddress from(d.source, d.source_length);
      if (from.port() != sender_port || d.truncated) ++out.foreign_sources;
      out.all = out.numbers.size() == kCount;
    });
    EXPECT_TRUE(set) << set.error().message();
    co_await wait_until(l, out.all);
    out.ran_out = (*receiver)->loop_buffers_ran_out();
    co_await (*receiver)->close();
    co_await (*sender)->close();
  }(*loop_, o, metrics));
  EXPECT_TRUE(o.multishot);
  ASSERT_EQ(o.sent, kCount);
  ASSERT_EQ(o.numbers.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(o.numbers[i], i) << "out of order or lost";
  for (size_t size : o.sizes) ASSERT_EQ(size, 100u);
  EXPECT_EQ(o.foreign_sources, 0);
  std::printf("loop buffers ran out %llu times\n", static_cast<unsigned long long>(o.ran_out));
  if (GetParam() == BackendKind::kIoUring) {
    EXPECT_GT(o.ran_out, 0u);  // the kernel fills all eight buffers in one pass
  }
  EXPECT_EQ(metrics.datagrams_received(), kCount);
  EXPECT_EQ(metrics.bytes_received(), kCount * 100u);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// A datagram longer than the buffer's room arrives cut, flagged, and counted.
TEST_P(UdpDatagramHandler, ALongerDatagramArrivesCutAndFlagged) {
  ASSERT_NO_FATAL_FAILURE(make_loop(16));
  struct Outcome {
    std::vector<std::pair<size_t, bool>> got;
    uint64_t truncated = 0;
    bool all = false;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto receiver = UdpSocket::bind(l, local, fitting_options());
    auto sender = UdpSocket::bind(l, local);
    if (!receiver || !sender) co_return;
    EXPECT_TRUE((*receiver)->on_datagram([&out](const DatagramRef& d) {
      out.got.emplace_back(d.data.size(), d.truncated);
      out.all = out.got.size() == 3;
    }));
    for (size_t size : {size_t{10}, size_t{5000}, size_t{20}}) {
      (void)co_await send_numbered(**sender, (*receiver)->local_address(), 0, 1, size);
    }
    co_await wait_until(l, out.all);
    out.truncated = (*receiver)->truncated();
    co_await (*receiver)->close();
    co_await (*sender)->close();
  }(*loop_, o));
  ASSERT_EQ(o.got.size(), 3u);
  EXPECT_EQ(o.got[0], std::make_pair(size_t{10}, false));
  EXPECT_EQ(o.got[1], std::make_pair(size_t{2048 - 48}, true));
  EXPECT_EQ(o.got[2], std::make_pair(size_t{20}, false));
  EXPECT_EQ(o.truncated, 1u);
}

// The handler closes its socket at the third datagram: it hears no more (the rest, in flight
// or queued in the kernel, are given back unseen), close() completes, nothing stays in flight.
TEST_P(UdpDatagramHandler, TheHandlerMayCloseItsSocket) {
  ASSERT_NO_FATAL_FAILURE(make_loop(64));
  struct Outcome {
    int heard = 0;
    bool closed = false;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto receiver = UdpSocket::bind(l, local, fitting_options());
    auto sender = UdpSocket::bind(l, local);
    if (!receiver || !sender) co_return;
    UdpSocket& socket = **receiver;
    (void)co_await send_numbered(**sender, socket.local_address(), 0, 50, 64);
    EXPECT_TRUE(socket.on_datagram([&out, &socket, &l](const DatagramRef&) {
      if (++out.heard == 3) {
        l.spawn([](UdpSocket& s, bool& closed) -> Task<> {
          co_await s.close();
          closed = true;
        }(socket, out.closed));
      }
    }));
    co_await wait_until(l, out.closed);
    (void)co_await send_numbered(**sender, socket.local_address(), 50, 10, 64);
    co_await io::sleep_for(l, 10ms);
    co_await (*sender)->close();
  }(*loop_, o));
  EXPECT_TRUE(o.closed);
  EXPECT_EQ(o.heard, 3);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// The handler destroys its socket at the first datagram: the socket's receive lives on until
// its last completion, hands nothing more over, and leaves nothing in flight or leaked.
TEST_P(UdpDatagramHandler, TheHandlerMayDestroyItsSocket) {
  ASSERT_NO_FATAL_FAILURE(make_loop(64));
  struct Outcome {
    int heard = 0;
    std::unique_ptr<UdpSocket> receiver;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto receiver = UdpSocket::bind(l, local, fitting_options());
    auto sender = UdpSocket::bind(l, local);
    if (!receiver || !sender) co_return;
    out.receiver = std::move(*receiver);
    const InetAddress to = out.receiver->local_address();
    (void)co_await send_numbered(**sender, to, 0, 20, 64);
    EXPECT_TRUE(out.receiver->on_datagram([&out](const DatagramRef&) {
      ++out.heard;
      out.receiver.reset();
    }));
    for (int i = 0; i < 5000 && out.receiver; ++i) co_await io::sleep_for(l, 1ms);
    EXPECT_EQ(out.receiver, nullptr);
    (void)co_await send_numbered(**sender, to, 20, 10, 64);
    co_await io::sleep_for(l, 50ms);  // the receive's last completion comes back meanwhile
    co_await (*sender)->close();
  }(*loop_, o));
  EXPECT_EQ(o.heard, 1);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// A connected socket's refusal (ICMP port unreachable) goes to the error handler once, counted
// as a receive error; the receive goes on and the next datagram reaches the handler.
TEST_P(UdpDatagramHandler, AnErrorIsToldAndTheReceiveGoesOn) {
  ASSERT_NO_FATAL_FAILURE(make_loop(16));
  struct Outcome {
    std::vector<std::error_code> errors;
    std::vector<uint32_t> heard;
    bool done = false;
  } o;
  UdpMetrics metrics(1);
  run([](EventLoop& l, Outcome& out, UdpMetrics& m) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto gone = UdpSocket::bind(l, local);
    auto a = UdpSocket::bind(l, local, fitting_options(&m));
    auto b = UdpSocket::bind(l, local);
    if (!gone || !a || !b) co_return;
    const InetAddress nobody = (*gone)->local_address();
    co_await (*gone)->close();
    EXPECT_TRUE((*a)->connect(nobody));
    EXPECT_TRUE((*a)->on_datagram(
        [&out](const DatagramRef& d) {
          out.heard.push_back(number_of(d.data));
          out.done = true;
        },
        [&out](std::error_code error) { out.errors.push_back(error); }));
    const std::string probe = "anyone?";
    (void)co_await (*a)->send(std::as_bytes(std::span(probe)));
    for (int i = 0; i < 5000 && out.errors.empty(); ++i) co_await io::sleep_for(l, 1ms);
    EXPECT_TRUE((*a)->connect((*b)->local_address()));
    (void)co_await send_numbered(**b, (*a)->local_address(), 7, 1, 16);
    co_await wait_until(l, out.done);
    co_await (*a)->close();
    co_await (*b)->close();
  }(*loop_, o, metrics));
  ASSERT_EQ(o.errors.size(), 1u);
  EXPECT_EQ(o.errors[0], std::errc::connection_refused);
  EXPECT_EQ(o.heard, std::vector<uint32_t>{7});
  EXPECT_EQ(metrics.receive_errors(), 1u);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// Datagrams a reader left queued go to the handler first, then the rest, in order.
TEST_P(UdpDatagramHandler, WhatAReaderLeftQueuedComesFirst) {
  ASSERT_NO_FATAL_FAILURE(make_loop(64));
  struct Outcome {
    std::vector<uint32_t> numbers;
    bool all = false;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto receiver = UdpSocket::bind(l, local, fitting_options());
    auto sender = UdpSocket::bind(l, local);
    if (!receiver || !sender) co_return;
    (void)co_await send_numbered(**sender, (*receiver)->local_address(), 0, 20, 32);
    std::array<ReceivedDatagram, 1> first;
    auto n = co_await (*receiver)->receive_batch(first);
    EXPECT_TRUE(n && *n == 1);
    if (n && *n == 1) out.numbers.push_back(number_of(first[0].data.bytes()));
    first[0].data.reset();
    EXPECT_TRUE((*receiver)->on_datagram([&out](const DatagramRef& d) {
      out.numbers.push_back(number_of(d.data));
      out.all = out.numbers.size() == 30;
    }));
    (void)co_await send_numbered(**sender, (*receiver)->local_address(), 20, 10, 32);
    co_await wait_until(l, out.all);
    co_await (*receiver)->close();
    co_await (*sender)->close();
  }(*loop_, o));
  ASSERT_EQ(o.numbers.size(), 30u);
  for (uint32_t i = 0; i < 30; ++i) EXPECT_EQ(o.numbers[i], i);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

// What it refuses, each with its own error, and nothing changed by a refusal.
TEST_P(UdpDatagramHandler, RefusesWhatItCannotServe) {
  ASSERT_NO_FATAL_FAILURE(make_loop(16));
  struct Outcome {
    std::error_code twice, batch_after, recv_from_after, while_waiting, no_multishot, closed;
    bool waiter_done = false;
  } o;
  run([](EventLoop& l, Outcome& out) -> Task<> {
    const auto local = *InetAddress::parse("127.0.0.1", 0);
    auto a = UdpSocket::bind(l, local, fitting_options());
    auto waiting = UdpSocket::bind(l, local, fitting_options());
    UdpOptions too_large;
    too_large.max_datagram_bytes = 4000;  // does not fit a 2 KiB loop buffer
    auto one_at_a_time = UdpSocket::bind(l, local, too_large);
    if (!a || !waiting || !one_at_a_time) co_return;
    auto ignore = [](const DatagramRef&) {};
    EXPECT_TRUE((*a)->on_datagram(ignore));
    out.twice = (*a)->on_datagram(ignore).error();
    std::array<ReceivedDatagram, 4> batch;
    out.batch_after = (co_await (*a)->receive_batch(batch)).error();
    std::array<std::byte, 16> buffer;
    out.recv_from_after = (co_await (*a)->recv_from(buffer)).error();

    l.spawn([](UdpSocket& s, bool& done) -> Task<> {
      std::array<ReceivedDatagram, 4> slots;
      (void)co_await s.receive_batch(slots);  // ends with the close below
      done = true;
    }(**waiting, out.waiter_done));
    co_await io::sleep_for(l, 2ms);
    out.while_waiting = (*waiting)->on_datagram(ignore).error();

    EXPECT_FALSE((*one_at_a_time)->multishot());
    out.no_multishot = (*one_at_a_time)->on_datagram(ignore).error();
    co_await (*one_at_a_time)->close();
    out.closed = (*one_at_a_time)->on_datagram(ignore).error();
    co_await (*a)->close();
    co_await (*waiting)->close();
    co_await wait_until(l, out.waiter_done);
  }(*loop_, o));
  EXPECT_EQ(o.twice, std::errc::device_or_resource_busy);
  EXPECT_EQ(o.batch_after, std::errc::device_or_resource_busy);
  EXPECT_EQ(o.recv_from_after, std::errc::device_or_resource_busy);
  EXPECT_EQ(o.while_waiting, std::errc::device_or_resource_busy);
  EXPECT_EQ(o.no_multishot, std::errc::operation_not_supported);
  EXPECT_EQ(o.closed, std::errc::operation_canceled);
  EXPECT_TRUE(o.waiter_done);
  EXPECT_EQ(loop_->in_flight(), 0u);
}

}  // namespace
}  // namespace ucp
