// bin/ws_bench_client: WebSocket echo pingpong load on UCP's own WebSocket client.
//
//   ws_bench_client -h HOST -p PORT [--path /] -c CONNS -s SIZE -d SECONDS [-w WARMUP]
//                   [-t THREADS] [--server-pid PID] [--tls]
//   ws_bench_client --version
//
// CONNS connections (spread over THREADS loops, one per thread) each keep one binary message of
// SIZE bytes in flight: send, wait for its echo (checked byte for byte), send the next. After
// WARMUP seconds it counts for SECONDS: messages echoed, round-trip latency (p50/p99/p999)
// and, with --server-pid, the server's CPU time from /proc/PID/stat over the same interval.
// The last line is the summary scripts/bench-ws.sh reads:
//   result messages=N seconds=S msgs_per_s=R server_cpu_s=C msgs_per_server_cpu_s=M
//          p50_us=A p99_us=B p999_us=D errors=E
// --tls: wss:// (TLS 1.2-1.3, the server's certificate not verified: a benchmark's self-signed
// one), every handshake before the clock starts.
// Exit 1 when no connection could be opened or errors exceed 1 % of the connections.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ucp/tls/TlsContext.h"
#include "ucp/version.h"
#include "ucp/ws/WebSocket.h"

#include "../bench_client/BenchSupport.h"

namespace {

using namespace std::chrono_literals;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/";
  uint32_t conns = 100;
  size_t size = 64;
  double seconds = 10;
  double warmup = 2;
  uint32_t threads = 1;
  int server_pid = 0;
  bool tls = false;
};

enum class Phase : int { kRamp, kWarm, kMeasure, kStop };

struct Shared {
  std::atomic<int> phase{static_cast<int>(Phase::kRamp)};
  std::atomic<uint32_t> connected{0};
  std::atomic<uint32_t> failed{0};
};

struct alignas(64) ThreadResult {
  uint64_t messages = 0;
  uint64_t errors = 0;
  bench::Histogram latency;
};

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "ws_bench_client: %s\n", why);
  std::fprintf(stderr,
               "usage: ws_bench_client -h HOST -p PORT [--path /] -c CONNS -s SIZE -d SECONDS "
               "[-w WARMUP] [-t THREADS] [--server-pid PID] [--tls]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--version") {  // every installed program answers it (tests/packaging)
      std::printf("ws_bench_client (UCP) %s\n", UCP_VERSION_STRING);
      std::exit(0);
    }
    if (flag == "--tls") {
      o.tls = true;
      continue;
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
      o.conns = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "-s") {
      o.size = static_cast<size_t>(std::atoll(value));
    } else if (flag == "-d") {
      o.seconds = std::atof(value);
    } else if (flag == "-w") {
      o.warmup = std::atof(value);
    } else if (flag == "-t") {
      o.threads = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "--server-pid") {
      o.server_pid = std::atoi(value);
    } else {
      usage(("unknown flag " + std::string(flag)).c_str());
    }
  }
  if (o.port == 0 || o.conns == 0 || o.threads == 0 || o.seconds <= 0) usage("bad arguments");
  return o;
}

ucp::Task<> connection(ucp::EventLoop& loop, const Options& o, const std::string& url,
                       const ucp::ClientOptions& tcp, Shared& shared, ThreadResult& result,
                       uint32_t id, uint32_t& live) {
  ucp::ws::Options ws_options;
  ws_options.max_message_bytes = o.size + 1;
  ws_options.max_frame_bytes = o.size + 1;
  auto ws = co_await ucp::ws::WebSocket::connect(loop, url, ws_options, tcp);
  if (!ws) {
    shared.failed.fetch_add(1);
    ++result.errors;
  } else {
    shared.connected.fetch_add(1);
    std::string payload(o.size, '\0');
    for (size_t i = 0; i < o.size; ++i) payload[i] = static_cast<char>((i * 131 + id) & 0xFF);
    const auto bytes = std::as_bytes(std::span(payload.data(), payload.size()));
    while (static_cast<Phase>(shared.phase.load(std::memory_order_relaxed)) != Phase::kStop) {
      const int64_t start = bench::now_ns();
      if (!co_await ws->send_binary(bytes)) {
        ++result.errors;
        break;
      }
      auto echo = co_await ws->receive();  // no timer per message: the script bounds a run
      if (!echo || echo->data.size() != o.size ||
          std::memcmp(echo->data.data(), payload.data(), o.size) != 0) {
        ++result.errors;
        break;
      }
      if (static_cast<Phase>(shared.phase.load(std::memory_order_relaxed)) == Phase::kMeasure) {
        ++result.messages;
        result.latency.record(bench::now_ns() - start);
      }
    }
    (void)co_await ws->close();  // bounded by close_timeout_ms
  }
  if (--live == 0) loop.stop();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const std::string url =
      (o.tls ? "wss://" : "ws://") + o.host + ":" + std::to_string(o.port) + o.path;
  ucp::ClientOptions tcp;
  if (o.tls) {
    ucp::tls::TlsClientOptions tls;
    tls.verify_peer = false;  // a benchmark's self-signed certificate
    auto context = ucp::tls::TlsContext::client(tls);
    if (!context) {
      std::fprintf(stderr, "ws_bench_client: TLS: %s\n", context.error().message.c_str());
      return 2;
    }
    tcp.tls = std::move(*context);
  }
  Shared shared;
  std::vector<ThreadResult> results(o.threads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      ucp::LoopOptions loop_options;
      loop_options.ring_entries = 4096;
      loop_options.provided_buffers_count = 2048;
      loop_options.provided_buffer_size = 16384;
      auto loop = ucp::EventLoop::create(loop_options);
      if (!loop) {
        std::fprintf(stderr, "ws_bench_client: %s\n", loop.error().message().c_str());
        shared.failed.fetch_add(o.conns);
        return;
      }
      uint32_t live = 0;
      for (uint32_t id = t; id < o.conns; id += o.threads) ++live;
      const uint32_t mine = live;
      for (uint32_t id = t; id < o.conns; id += o.threads) {
        loop->spawn(connection(**loop, o, url, tcp, shared, results[t], id, live));
      }
      if (mine > 0) loop->run();
    });
  }
  // Ramp: until every connection is open or failed (bounded).
  const auto ramp_end = std::chrono::steady_clock::now() + 30s;
  while (shared.connected.load() + shared.failed.load() < o.conns &&
         std::chrono::steady_clock::now() < ramp_end) {
    std::this_thread::sleep_for(10ms);
  }
  shared.phase.store(static_cast<int>(Phase::kWarm));
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const auto server_before = o.server_pid > 0 ? bench::process_cpu(o.server_pid) : std::nullopt;
  const int64_t begin = bench::now_ns();
  shared.phase.store(static_cast<int>(Phase::kMeasure));
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  shared.phase.store(static_cast<int>(Phase::kStop));
  const double seconds = static_cast<double>(bench::now_ns() - begin) / 1e9;
  const auto server_after = o.server_pid > 0 ? bench::process_cpu(o.server_pid) : std::nullopt;
  for (auto& thread : threads) thread.join();

  ThreadResult total;
  for (const auto& r : results) {
    total.messages += r.messages;
    total.errors += r.errors;
    total.latency.merge(r.latency);
  }
  double server_cpu = -1;
  if (server_before && server_after) server_cpu = server_after->total() - server_before->total();
  std::printf(
      "result messages=%llu seconds=%.3f msgs_per_s=%.0f server_cpu_s=%.3f "
      "msgs_per_server_cpu_s=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f errors=%llu "
      "connected=%u\n",
      static_cast<unsigned long long>(total.messages), seconds,
      static_cast<double>(total.messages) / seconds, server_cpu,
      server_cpu > 0 ? static_cast<double>(total.messages) / server_cpu : 0.0,
      total.latency.percentile_us(0.50), total.latency.percentile_us(0.99),
      total.latency.percentile_us(0.999), static_cast<unsigned long long>(total.errors),
      shared.connected.load());
  if (shared.connected.load() == 0 || total.errors * 100 > o.conns) return 1;
  return 0;
}
