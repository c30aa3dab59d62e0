// A market-data feed receiver: joins a UDP multicast group (source-specific with feed.source)
// and checks the 64-bit big-endian sequence number that starts each datagram: a jump forward is
// a gap (a real handler asks its recovery service for the missing ones), an old number a late
// copy; the counts are logged every feed.report_interval_ms. Each datagram is checked in an
// on_datagram() handler, called straight from its completion: no batch, no coroutine resumed
// per datagram, its buffer back to the loop as soon as the check returns. A LoopService:
// Ctrl-C stops it.
// Usage: bin/example_market_data --set feed.group=239.1.1.1 [--set feed.interface=127.0.0.1]

#include <chrono>
#include <utility>

#include "ucp/app/Application.h"
#include "ucp/app/LoopService.h"
#include "ucp/io/PeriodicTimer.h"
#include "ucp/log/Logger.h"
#include "ucp/net/UdpSocket.h"

namespace {

using ms = std::chrono::milliseconds;

struct Feed {
  uint64_t next = 0;  // the sequence number expected; 0 before the first message
  uint64_t received = 0, gaps = 0, missing = 0, late = 0, malformed = 0;

  void on_message(std::span<const std::byte> bytes) {
    if (bytes.size() < 8) return void(++malformed);
    uint64_t sequence = 0;
    for (size_t i = 0; i < 8; ++i) sequence = sequence << 8 | std::to_integer<uint64_t>(bytes[i]);
    ++received;
    if (next != 0 && sequence < next) return void(++late);
    if (next != 0 && sequence > next) {
      LOG_WARN("gap: {} message(s) missing ({}..{})", sequence - next, next, sequence - 1);
      ++gaps;
      missing += sequence - next;
    }
    next = sequence + 1;
  }
};

ucp::Task<> report(ucp::EventLoop& loop, const Feed& feed, ms every) {
  for (ucp::PeriodicTimer timer(loop, every); co_await timer.tick();) {
    LOG_INFO("feed: received={} gaps={} missing={} late={} malformed={} next={}", feed.received,
             feed.gaps, feed.missing, feed.late, feed.malformed, feed.next);
  }
}

ucp::Task<> receive(ucp::EventLoop& loop, const ucp::app::Config& config, Feed& feed) {
  ucp::MulticastGroup membership{*ucp::InetAddress::parse(config.get<std::string>("feed.group"), 0),
                                 ucp::InetAddress::parse(config.get<std::string>("feed.source"), 0),
                                 config.get<std::string>("feed.interface")};
  const char* wildcard = membership.group.family() == AF_INET6 ? "::" : "0.0.0.0";
  const auto any = *ucp::InetAddress::parse(wildcard, config.get<uint16_t>("feed.port"));
  ucp::UdpOptions options;
  options.reuse_port = true;               // several receivers of one feed on this host
  options.max_datagram_bytes = 4096 - 48;  // fits a loop receive buffer: the multishot receive
  options.receive_buffer_bytes = 8 << 20;  // a burst waits here while we are busy
  auto socket = ucp::UdpSocket::bind(loop, any, options);
  auto joined =
      socket ? (*socket)->join(membership) : ucp::Result<void>(ucp::Unexpected{socket.error()});
  if (!joined) {
    LOG_ERROR("cannot join {}: {}", membership.group.ip(), joined.error().message());
    co_return;  // the program ends
  }
  auto receiving = (*socket)->on_datagram(
      [&feed](const ucp::DatagramRef& datagram) { feed.on_message(datagram.data); },
      [](std::error_code error) { LOG_WARN("receive: {}", error.message()); });
  if (!receiving) {
    LOG_ERROR("cannot receive: {}", receiving.error().message());
    co_return;
  }
  LOG_INFO("listening on {} (udp, multicast group {})", any.to_string(), membership.group.ip());
  co_await report(loop, feed, config.get<ms>("feed.report_interval_ms"));  // until a stop signal
  co_await (*socket)->close();
}

}  // namespace

int main(int argc, char** argv) {
  ucp::app::Application app("example_market_data");
  auto& feed = app.schema().section("feed", "the multicast feed this program receives");
  feed.text("group", "239.1.1.1", "multicast group, IPv4 or IPv6").check([](std::string_view v) {
    const auto group = ucp::InetAddress::parse(std::string(v), 0);
    return group && ucp::is_multicast(*group) ? "" : "not a multicast address";
  });
  feed.integer("port", 30001, 1, 65535, "UDP port of the feed");
  feed.text("interface", "", "local address or interface name to join on; empty: any");
  feed.text("source", "", "source-specific: only this sender (an IP address); empty: any")
      .check([](std::string_view v) {
        return v.empty() || ucp::InetAddress::parse(std::string(v), 0) ? "" : "not an IP address";
      });
  feed.duration("report_interval_ms", ms(1000), ms(1), ms(3600000), "how often to log the counts");
  app.schema().set_defaults({"log.file=", "event_loop.provided_buffers_count=256"});
  if (auto exit_code = app.setup(argc, argv)) return *exit_code;
  Feed state;  // outlives the loop's coroutines
  ucp::app::LoopService service(app.loop_options(), [&app, &state](ucp::EventLoop& loop) {
    return receive(loop, app.config(), state);
  });
  return app.serve(service, "market_data");
}
