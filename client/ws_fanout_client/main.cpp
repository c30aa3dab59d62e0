// bin/ws_fanout_client: publish/subscribe fan-out load on UCP's own WebSocket client.
//
//   ws_fanout_client -h HOST -p PORT [--path /chat/bench] -c SUBSCRIBERS -s SIZE -d SECONDS
//                    [-w WARMUP] [-t THREADS] [--window W] [--server-pid PID]
//   ws_fanout_client --version
//
// SUBSCRIBERS connections (spread over THREADS loops) join the room at PATH of a server that
// sends every message a member sends to every member (bin/example_ws_chat's /chat/{room}, or
// bench/peers/node_ws_fanout.js): each waits for its first message (the server's "joined"),
// then counts what arrives. One more connection publishes: text messages of SIZE bytes, each
// sent once every subscriber has received all but the last W before it (a window that keeps
// the server busy without letting a queue grow). After WARMUP seconds it counts for SECONDS:
// messages delivered to the subscribers and, with --server-pid, the server's CPU time from
// /proc/PID/stat over the same interval. The last line is what scripts/bench-ws-fanout.sh reads:
//   result published=N delivered=D seconds=S deliveries_per_s=R server_cpu_s=C
//          deliveries_per_server_cpu_s=M subscribers=K errors=E
// Exit 1 when a subscriber could not join or lost a message.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ucp/io/Operations.h"
#include "ucp/version.h"
#include "ucp/ws/WebSocket.h"

#include "../bench_client/BenchSupport.h"

namespace {

using namespace std::chrono_literals;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/chat/bench";
  uint32_t subscribers = 1000;
  size_t size = 64;
  double seconds = 10;
  double warmup = 2;
  uint32_t threads = 1;
  uint64_t window = 4;
  int server_pid = 0;
};

struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
};

struct Shared {
  explicit Shared(uint32_t threads) : received(threads) {}
  std::atomic<uint32_t> joined{0};
  std::atomic<uint32_t> failed{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> published{0};
  std::vector<Counter> received;  // per thread: each thread adds to its own
  uint64_t delivered() const {
    uint64_t total = 0;
    for (const auto& c : received) total += c.value.load(std::memory_order_relaxed);
    return total;
  }
};

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "ws_fanout_client: %s\n", why);
  std::fprintf(stderr,
               "usage: ws_fanout_client -h HOST -p PORT [--path /chat/bench] -c SUBSCRIBERS "
               "-s SIZE -d SECONDS [-w WARMUP] [-t THREADS] [--window W] [--server-pid PID]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--version") {  // every installed program answers it (tests/packaging)
      std::printf("ws_fanout_client (UCP) %s\n", UCP_VERSION_STRING);
      std::exit(0);
    }
    if (i + 1 >= argc) usage(("missing value for " + std::string(flag)).c_str());
    const char* value = argv[++i];
    if (flag == "-h") {
      o.host = value;
    } else if (flag == "-p") {
      o.port = static_cast<uint16_t>(std::atoi(value));
    } else if (flag == "--path") {
      o.path = value;
    } else if (flag == "-c") {
      o.subscribers = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "-s") {
      o.size = static_cast<size_t>(std::atoll(value));
    } else if (flag == "-d") {
      o.seconds = std::atof(value);
    } else if (flag == "-w") {
      o.warmup = std::atof(value);
    } else if (flag == "-t") {
      o.threads = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "--window") {
      o.window = static_cast<uint64_t>(std::atoll(value));
    } else if (flag == "--server-pid") {
      o.server_pid = std::atoi(value);
    } else {
      usage(("unknown flag " + std::string(flag)).c_str());
    }
  }
  if (o.port == 0 || o.subscribers == 0 || o.threads == 0 || o.seconds <= 0 || o.window == 0) {
    usage("bad arguments");
  }
  return o;
}

ucp::ws::Options ws_options(const Options& o) {
  ucp::ws::Options options;
  options.max_message_bytes = o.size + 64;
  options.max_frame_bytes = o.size + 64;
  return options;
}

ucp::Task<> subscriber(ucp::EventLoop& loop, const Options& o, const std::string& url,
                       Shared& shared, Counter& received, uint32_t& live) {
  auto ws = co_await ucp::ws::WebSocket::connect(loop, url, ws_options(o));
  if (!ws || !co_await ws->receive()) {  // the server's "joined": subscribed from here on
    shared.failed.fetch_add(1);
  } else {
    shared.joined.fetch_add(1);
    while (auto message = co_await ws->receive()) {
      received.value.store(received.value.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    }
  }
  if (--live == 0) loop.stop();
}

// Sends a message once every subscriber has all but the last `window` before it.
ucp::Task<> publisher(ucp::EventLoop& loop, const Options& o, const std::string& url,
                      Shared& shared) {
  auto ws = co_await ucp::ws::WebSocket::connect(loop, url, ws_options(o));
  if (!ws || !co_await ws->receive()) {
    shared.failed.fetch_add(1);
    co_return;
  }
  const uint64_t subscribers = shared.joined.load();
  const std::string payload(o.size, 'm');
  while (!shared.stop.load(std::memory_order_relaxed)) {
    const uint64_t sent = shared.published.load(std::memory_order_relaxed);
    if (sent >= o.window && shared.delivered() < (sent - o.window) * subscribers) {
      (void)co_await ucp::io::sleep_for(loop, 20us);  // the subscribers catch up
      continue;
    }
    if (!co_await ws->send_text(payload)) break;
    shared.published.store(sent + 1, std::memory_order_relaxed);
    if (auto own = co_await ws->receive(); !own) break;  // a member gets its own message too
  }
  (void)co_await ws->close();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const std::string url = "ws://" + o.host + ":" + std::to_string(o.port) + o.path;
  Shared shared(o.threads);
  std::vector<std::unique_ptr<ucp::EventLoop>> loops(o.threads);
  for (auto& loop : loops) {
    ucp::LoopOptions loop_options;
    loop_options.ring_entries = 4096;
    loop_options.provided_buffers_count = 4096;
    auto made = ucp::EventLoop::create(loop_options);
    if (!made) {
      std::fprintf(stderr, "ws_fanout_client: %s\n", made.error().message().c_str());
      return 1;
    }
    loop = std::move(*made);
  }
  std::vector<uint32_t> live(o.threads, 0);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.threads; ++t) {
    ucp::EventLoop& loop = *loops[t];
    for (uint32_t id = t; id < o.subscribers; id += o.threads) ++live[t];
    loop.post([&, t] {
      for (uint32_t id = t; id < o.subscribers; id += o.threads) {
        loop.spawn(subscriber(loop, o, url, shared, shared.received[t], live[t]));
      }
    });
    threads.emplace_back([&loop] { loop.run(); });
  }
  // Ramp: until every subscriber has joined or failed (bounded).
  const auto ramp_end = std::chrono::steady_clock::now() + 60s;
  while (shared.joined.load() + shared.failed.load() < o.subscribers &&
         std::chrono::steady_clock::now() < ramp_end) {
    std::this_thread::sleep_for(10ms);
  }
  std::thread publishing([&] {
    ucp::LoopOptions loop_options;
    auto loop = ucp::EventLoop::create(loop_options);
    if (!loop) return;
    loop->spawn([](ucp::EventLoop& l, const Options& opts, const std::string& where,
                   Shared& s) -> ucp::Task<> {
      co_await publisher(l, opts, where, s);
      l.stop();
    }(**loop, o, url, shared));
    loop->run();
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const auto server_before = o.server_pid > 0 ? bench::process_cpu(o.server_pid) : std::nullopt;
  const uint64_t published_before = shared.published.load();
  const uint64_t delivered_before = shared.delivered();
  const int64_t begin = bench::now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const uint64_t delivered = shared.delivered() - delivered_before;
  const uint64_t published = shared.published.load() - published_before;
  const double seconds = static_cast<double>(bench::now_ns() - begin) / 1e9;
  const auto server_after = o.server_pid > 0 ? bench::process_cpu(o.server_pid) : std::nullopt;
  shared.stop.store(true);
  publishing.join();
  // Every subscriber must have had every message: wait (bounded) for the last ones.
  const uint64_t expected = shared.published.load() * shared.joined.load();
  const auto drain_end = std::chrono::steady_clock::now() + 30s;
  while (shared.delivered() < expected && std::chrono::steady_clock::now() < drain_end) {
    std::this_thread::sleep_for(10ms);
  }
  const uint64_t lost = expected - std::min(expected, shared.delivered());
  for (auto& loop : loops) loop->stop();
  for (auto& thread : threads) thread.join();

  double server_cpu = -1;
  if (server_before && server_after) server_cpu = server_after->total() - server_before->total();
  std::printf(
      "result published=%llu delivered=%llu seconds=%.3f deliveries_per_s=%.0f "
      "server_cpu_s=%.3f deliveries_per_server_cpu_s=%.0f subscribers=%u errors=%llu\n",
      static_cast<unsigned long long>(published), static_cast<unsigned long long>(delivered),
      seconds, static_cast<double>(delivered) / seconds, server_cpu,
      server_cpu > 0 ? static_cast<double>(delivered) / server_cpu : 0.0, shared.joined.load(),
      static_cast<unsigned long long>(lost + shared.failed.load()));
  return shared.failed.load() > 0 || lost > 0 ? 1 : 0;
}
