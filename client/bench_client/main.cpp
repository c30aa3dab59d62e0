// bench_client: echo and HTTP load generator, closed or open loop (docs/design.md, "Binaries";
// docs/benchmarks.md).
//
//   bench_client -h HOST -p PORT -c CONNS -s SIZE -d SECONDS [-P DEPTH] [-t THREADS] [--json]
//                [-w WARMUP_SECONDS] [--server-pid PID] [--uring | --epoll] [--churn]
//                [--rate R] [--http PATH] [--hgrm FILE] [--busy-poll] [--tls]
//   bench_client --version
//
// --churn measures connection set-up instead (Churn.h): each of CONNS slots connects, echoes
// one SIZE-byte message, closes and starts over; the report is in connections per second.
//
// --rate R sends R requests per second in total on a fixed schedule (open loop, as wrk2):
// request k of connection c is due at start + (c + k * CONNS) / R, one in flight per
// connection, and its latency runs from when it was due, so a slow answer that holds back the
// next request shows in that request's latency (coordinated omission corrected). The report
// adds p90 and p99.99, the achieved rate, and the client's own pacing delay; it says when the
// schedule was not kept. --http PATH sends keep-alive GETs of PATH instead of echo messages
// (a request is answered when its response's body has ended: Content-Length or chunked).
// --hgrm FILE writes the latency distribution in HdrHistogram's .hgrm format (µs).
// --busy-poll keeps the client's loops spinning instead of sleeping in the kernel, so neither
// a due time nor an answer waits for a thread wake-up (the client's CPUs run at 100 %).
// --tls makes every connection a TLS one (TLS 1.2-1.3, ALPN http/1.1, the server's certificate
// not verified: a benchmark's self-signed one), handshaken during the ramp; not with --churn.
//
// Each thread runs one UCP EventLoop over its share of the connections (UcpPingpong.cpp), made
// with TcpClient: the client of UCP's own tests is the one that drives the benchmarks. The
// backend is the mode: epoll by default (a readiness loop, one syscall per send, arrivals
// spread like independent clients), io_uring with --uring (every connection's sends in one
// io_uring_enter). With --rate the default is io_uring: its loop waits with a nanosecond
// timeout, where the epoll loop's epoll_wait counts whole milliseconds, which would make the
// schedule late by up to 1 ms; and the open loop spreads the sends by the schedule, not by the
// answers (--epoll keeps epoll). A run has three phases:
//   ramp     connect every connection (at most kMaxConnectsInFlight per thread at once, refused or
//            EAGAIN connects retried for kConnectRetryMs), then echo one warm-up message on each,
//            so that the server has accepted and served every connection before the clock starts;
//   warm-up  optional (-w): full load, nothing counted (page faults, TCP windows settle);
//   measure  each connection keeps DEPTH messages of SIZE bytes in flight for SECONDS (or, with
//            --rate, sends on the schedule); every echoed byte is compared with what was sent,
//            every completed message is one request and one latency sample (first byte
//            written, or due, -> last byte echoed);
//   stop     no new messages; the connections are closed.
// Message `seq` of connection c is a slice of a shared random table at an offset hashed from
// (c, seq), so neither side needs a per-connection buffer and every byte is checked by memcmp.
//
// With --server-pid (repeatable: servers sharing a port, their times summed), the server's utime
// and stime (from /proc/PID/stat) are sampled at the start and the end of the measure phase, so
// requests per server-CPU-second cover exactly the requests counted. Exit status: 0 clean, 1 any
// verification error, connect failure or lost connection, 2 bad usage.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "ucp/base/UniqueFd.h"
#include "ucp/net/InetAddress.h"
#include "ucp/version.h"

#include "BenchSupport.h"
#include "Churn.h"
#include "Pingpong.h"
#include "RateReport.h"

namespace {

using bench::Counters;
using bench::CpuTimes;
using bench::Histogram;
using bench::now_ns;
using bench::Options;
using bench::PatternTable;
using bench::Phase;
using bench::processes_cpu;
using bench::runqueue_wait_between;
using bench::runqueue_waits;
using bench::RunQueueWaits;
using bench::self_cpu;
using bench::Shared;

// ---------------------------------------------------------------------------------------------
// Options

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "bench_client: %s\n", why);
  std::fprintf(
      stderr,
      "usage: bench_client -h HOST -p PORT -c CONNS -s SIZE -d SECONDS [-P DEPTH] "
      "[-t THREADS] [-w WARMUP_SECONDS] [--uring | --epoll] [--churn] [--json] "
      "[--server-pid PID]... [--rate R] [--http PATH] [--hgrm FILE] [--busy-poll] [--tls]\n"
      "       bench_client --version\n"
      "  echo pingpong: each connection keeps DEPTH (default 1) messages of SIZE bytes "
      "in flight;\n"
      "  --rate R: R requests/s in total on a fixed schedule over the connections (open loop,\n"
      "  latency from each request's due time: coordinated omission corrected);\n"
      "  --http PATH: keep-alive GET PATH instead of echo messages (-s is then unused);\n"
      "  --hgrm FILE: the latency distribution in HdrHistogram's .hgrm format (us);\n"
      "  --busy-poll: the client's loops never sleep (no wake-up delay; each burns a CPU);\n"
      "  --tls: TLS connections (handshake in the ramp; the certificate is not verified);\n"
      "  --churn: each of CONNS slots connects, echoes one SIZE-byte message, closes "
      "(RST) and\n"
      "  starts over; reports connections/s and connect+echo latency.\n"
      "  Every echoed byte is verified; exit 1 on any error, 2 on bad usage.\n");
  std::exit(2);
}

long parse_number(std::string_view flag, const char* text, long low, long high) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high) {
    const std::string why = std::string(flag) + ": expected an integer in [" + std::to_string(low) +
                            ", " + std::to_string(high) + "], got '" + text + "'";
    usage(why.c_str());
  }
  return value;
}

double parse_rate(const char* text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(value > 0) || value > 1e9) {
    usage((std::string("--rate: expected requests per second (> 0), got '") + text + "'").c_str());
  }
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  bool have_port = false;
  bool epoll = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help") usage(nullptr);
    if (flag == "--version") {
      std::printf("bench_client (UCP) %s\n", UCP_VERSION_STRING);
      std::exit(0);
    }
    if (flag == "--json") {
      options.json = true;
      continue;
    }
    if (flag == "--uring") {
      options.uring = true;
      continue;
    }
    if (flag == "--churn") {
      options.churn = true;
      continue;
    }
    if (flag == "--epoll") {
      epoll = true;
      continue;
    }
    if (flag == "--busy-poll") {
      options.busy_poll = true;
      continue;
    }
    if (flag == "--tls") {
      options.tls = true;
      continue;
    }
    if (i + 1 >= argc) usage((std::string(flag) + " needs a value").c_str());
    const char* value = argv[++i];
    if (flag == "-h") {
      options.host = value;
    } else if (flag == "-p") {
      options.port = static_cast<uint16_t>(parse_number(flag, value, 1, 65535));
      have_port = true;
    } else if (flag == "-c") {
      options.conns = static_cast<int>(parse_number(flag, value, 1, 1'000'000));
    } else if (flag == "-s") {
      options.size = static_cast<size_t>(parse_number(flag, value, 1, 16 * 1024 * 1024));
    } else if (flag == "-d") {
      options.seconds = static_cast<double>(parse_number(flag, value, 1, 86'400));
    } else if (flag == "-P") {
      options.depth = static_cast<int>(parse_number(flag, value, 1, 1024));
    } else if (flag == "-t") {
      options.threads = static_cast<int>(parse_number(flag, value, 1, 256));
    } else if (flag == "-w") {
      options.warmup_s = static_cast<int>(parse_number(flag, value, 0, 3600));
    } else if (flag == "--server-pid") {
      options.server_pids.push_back(static_cast<int>(parse_number(flag, value, 1, 1 << 30)));
    } else if (flag == "--rate") {
      options.rate = parse_rate(value);
    } else if (flag == "--http") {
      options.http_path = value;
      if (options.http_path.empty() || options.http_path[0] != '/' ||
          options.http_path.find_first_of(" \r\n") != std::string::npos) {
        usage("--http: expected a path that starts with '/' (no spaces)");
      }
    } else if (flag == "--hgrm") {
      options.hgrm_path = value;
    } else {
      usage((std::string("unknown option ") + std::string(flag)).c_str());
    }
  }
  if (!have_port) usage("-p PORT is required");
  if (options.churn && options.depth != 1) {
    usage("--churn runs one message per connection: no -P");
  }
  if (options.churn && options.tls) usage("--churn measures plain TCP set-up: no --tls");
  if (options.churn && (options.rate > 0 || !options.http_path.empty())) {
    usage("--churn measures echo connection set-up: no --rate, no --http");
  }
  if (options.rate > 0 && options.depth != 1) {
    usage("--rate keeps one request in flight per connection (the schedule decides): no -P");
  }
  if (options.uring && epoll) usage("--uring and --epoll exclude each other");
  // io_uring by default with --rate (see the top of this file); --epoll keeps epoll.
  if (options.rate > 0 && !epoll && !options.uring) {
    options.uring = true;
    options.uring_by_default = true;
  }
  options.threads = std::min(options.threads, options.conns);
  return options;
}

// ---------------------------------------------------------------------------------------------

/// A numeric IPv4/IPv6 address, or the first IPv4 address of a name (before any load starts,
/// so the blocking lookup costs nothing measured).
std::optional<ucp::InetAddress> resolve(const std::string& host, uint16_t port) {
  if (auto numeric = ucp::InetAddress::parse(host, port)) return numeric;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  sockaddr_in address{};
  std::memcpy(&address, result->ai_addr, sizeof address);
  address.sin_port = htons(port);
  freeaddrinfo(result);
  return ucp::InetAddress(reinterpret_cast<const sockaddr*>(&address), sizeof address);
}

bool raise_fd_limit(int conns) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t needed = static_cast<rlim_t>(conns) + 64;
  if (limit.rlim_cur < needed) {
    std::fprintf(stderr,
                 "bench_client: %d connections need %llu file descriptors; the hard limit is "
                 "%llu (raise it: ulimit -Hn)\n",
                 conns, static_cast<unsigned long long>(needed),
                 static_cast<unsigned long long>(limit.rlim_cur));
    return false;
  }
  return true;
}

/// How far ahead of the phase change the open-loop schedule starts (the load threads look at
/// the phase once a millisecond).
constexpr int64_t kScheduleLeadNs = 20'000'000;

std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  if (!raise_fd_limit(options.conns)) return 1;

  Shared shared;
  shared.options = &options;
  const auto address = resolve(options.host, options.port);
  if (!address) {
    std::fprintf(stderr, "bench_client: cannot resolve %s\n", options.host.c_str());
    return 2;
  }
  shared.address = *address;
  if (options.tls) {
    ucp::tls::TlsClientOptions tls;
    tls.verify_peer = false;  // a benchmark's self-signed certificate
    tls.alpn = {"http/1.1"};
    auto context = ucp::tls::TlsContext::client(tls);
    if (!context) {
      std::fprintf(stderr, "bench_client: TLS: %s\n", context.error().message.c_str());
      return 2;
    }
    shared.tls = std::move(*context);
  }
  ucp::BackendKind backend = options.uring ? ucp::BackendKind::kIoUring : ucp::BackendKind::kEpoll;
  if (options.churn) {
    bench::ChurnOptions churn;
    churn.address = shared.address;
    churn.backend = backend;
    churn.target = options.host + ":" + std::to_string(options.port);
    churn.conns = options.conns;
    churn.size = options.size;
    churn.seconds = options.seconds;
    churn.warmup_s = options.warmup_s;
    churn.threads = options.threads;
    churn.json = options.json;
    churn.server_pids = options.server_pids;
    return bench::run_churn(churn, g_interrupted);
  }
  FILE* progress = options.json ? stderr : stdout;

  const PatternTable pattern(options.size);
  const auto thread_count = static_cast<size_t>(options.threads);
  std::string why;
  if (!bench::ucp_backend_available(backend, &why)) {
    if (!options.uring_by_default) {
      std::fprintf(stderr, "bench_client: %s\n", why.c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "bench_client: io_uring is not available here (%s): the schedule runs on "
                 "epoll, whose timers count whole milliseconds (see the pacing delay)\n",
                 why.c_str());
    backend = ucp::BackendKind::kEpoll;
  }
  std::vector<Counters> counters(thread_count);
  std::vector<std::unique_ptr<bench::PingpongThread>> loads;
  for (size_t t = 0; t < thread_count; ++t) {
    const auto first = static_cast<int>(t);
    loads.push_back(
        bench::make_ucp_pingpong(shared, counters[t], pattern, first, options.threads, backend));
  }
  const int64_t ramp_start = now_ns();
  std::vector<std::thread> threads;
  std::atomic<size_t> finished{0};
  for (auto& load : loads) {
    threads.emplace_back([&load, &finished] {
      load->run();
      finished.fetch_add(1);
    });
  }

  // Wait for every thread's ramp (each bounds its own), reporting progress once per second.
  int64_t next_report = ramp_start + 1'000'000'000;
  while (shared.ramped_threads.load() < options.threads && !g_interrupted.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (now_ns() >= next_report) {
      int connected = 0;
      for (auto& c : counters) connected += c.connected.load(std::memory_order_relaxed);
      std::fprintf(progress, "ramp: %d/%d connections\n", connected, options.conns);
      std::fflush(progress);
      next_report += 1'000'000'000;
    }
  }
  const double ramp_s = static_cast<double>(now_ns() - ramp_start) / 1e9;
  const bool ramp_ok = !shared.ramp_failed.load() && !g_interrupted.load();

  // Load starts now (an open-loop schedule a little later, so that every thread has seen the
  // phase change before its first request is due); counting, latency samples and CPU
  // sampling after the warm-up.
  shared.load_start_ns = now_ns() + (options.rate > 0 ? kScheduleLeadNs : 0);
  shared.record_start_ns = shared.load_start_ns + int64_t{options.warmup_s} * 1'000'000'000;
  shared.measure_end_ns = shared.record_start_ns + static_cast<int64_t>(options.seconds * 1e9);
  shared.phase.store(ramp_ok ? Phase::kMeasure : Phase::kStop);
  if (ramp_ok && options.warmup_s > 0) {
    std::fprintf(progress, "warm-up: %d s\n", options.warmup_s);
    std::fflush(progress);
    while (now_ns() < shared.record_start_ns && !g_interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  CpuTimes client_before = self_cpu();
  std::optional<CpuTimes> server_before;
  if (!options.server_pids.empty()) server_before = processes_cpu(options.server_pids);
  const std::optional<RunQueueWaits> client_waited_before = runqueue_waits({getpid()});
  std::optional<RunQueueWaits> server_waited_before;
  if (!options.server_pids.empty()) server_waited_before = runqueue_waits(options.server_pids);
  // The CPUs each side may use, for their steal time.
  cpu_set_t client_cpus;
  CPU_ZERO(&client_cpus);
  cpu_set_t server_cpus;
  CPU_ZERO(&server_cpus);
  bool server_cpus_known = !options.server_pids.empty();
  bench::add_affinity(0, client_cpus);
  for (int pid : options.server_pids) server_cpus_known &= bench::add_affinity(pid, server_cpus);
  const std::optional<double> client_stolen_before = bench::steal_seconds(client_cpus);
  std::optional<double> server_stolen_before;
  if (server_cpus_known) server_stolen_before = bench::steal_seconds(server_cpus);
  const int64_t start = now_ns();

  uint64_t last_requests = 0;
  uint64_t last_bytes = 0;
  int64_t last_time = start;
  while (ramp_ok) {
    const int64_t now = now_ns();
    if (now >= shared.measure_end_ns || g_interrupted.load()) break;
    const int64_t next_tick = std::min(last_time + 1'000'000'000, shared.measure_end_ns);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(next_tick - now, 0)));
    uint64_t requests = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    int connected = 0;
    for (auto& c : counters) {
      requests += c.requests.load(std::memory_order_relaxed);
      bytes += c.bytes.load(std::memory_order_relaxed);
      errors += c.verify_errors.load(std::memory_order_relaxed) +
                c.closed_errors.load(std::memory_order_relaxed);
      connected += c.connected.load(std::memory_order_relaxed);
    }
    const int64_t tick_end = now_ns();
    const double dt = static_cast<double>(tick_end - last_time) / 1e9;
    std::fprintf(progress, "[%5.1fs] qps %10.0f  %8.2f MB/s  conns %d  errors %" PRIu64 "\n",
                 static_cast<double>(tick_end - start) / 1e9,
                 static_cast<double>(requests - last_requests) / dt,
                 static_cast<double>(bytes - last_bytes) / dt / 1e6, connected, errors);
    std::fflush(progress);
    last_requests = requests;
    last_bytes = bytes;
    last_time = tick_end;
  }
  // At the interval's end, while the load threads still exist (an ended thread's schedstat
  // is gone, and its wait with it).
  const std::optional<RunQueueWaits> client_waited_after = runqueue_waits({getpid()});
  std::optional<RunQueueWaits> server_waited_after;
  if (!options.server_pids.empty()) server_waited_after = runqueue_waits(options.server_pids);
  const std::optional<double> client_stolen_after = bench::steal_seconds(client_cpus);
  std::optional<double> server_stolen_after;
  if (server_cpus_known) server_stolen_after = bench::steal_seconds(server_cpus);
  // Closed loop: the load stops now (each thread leaves its loop within 100 ms). Open loop:
  // each thread stops once the answers its schedule still owes are in (at most kDrainMs); an
  // interrupt stops them at once.
  if (options.rate <= 0 || !ramp_ok) shared.phase.store(Phase::kStop);
  while (finished.load() < thread_count) {
    if (g_interrupted.load()) shared.phase.store(Phase::kStop);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& thread : threads) thread.join();
  const double seconds = static_cast<double>(now_ns() - start) / 1e9;
  const CpuTimes client_after = self_cpu();
  std::optional<CpuTimes> server_after;
  if (!options.server_pids.empty()) server_after = processes_cpu(options.server_pids);

  Histogram histogram;
  Histogram pacing;
  bench::RateTally tally;
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t verify_errors = 0;
  uint64_t connect_errors = 0;
  uint64_t closed_errors = 0;
  uint64_t http_errors = 0;
  for (size_t t = 0; t < thread_count; ++t) {
    histogram.merge(loads[t]->histogram());
    pacing.merge(loads[t]->pacing());
    const bench::RateTally one = loads[t]->tally();
    tally.scheduled += one.scheduled;
    tally.completed += one.completed;
    tally.unanswered += one.unanswered;
    tally.answered_in_interval += one.answered_in_interval;
    requests += counters[t].requests.load();
    bytes += counters[t].bytes.load();
    verify_errors += counters[t].verify_errors.load();
    connect_errors += counters[t].connect_errors.load();
    closed_errors += counters[t].closed_errors.load();
    http_errors += counters[t].http_errors.load();
  }
  const uint64_t errors = verify_errors + connect_errors + closed_errors + http_errors;
  const double client_cpu = client_after.total() - client_before.total();
  const double client_user = client_after.user_s - client_before.user_s;
  double server_cpu = -1;
  double server_user = -1;
  if (server_before && server_after) {
    server_cpu = server_after->total() - server_before->total();
    server_user = server_after->user_s - server_before->user_s;
  }
  if (!options.hgrm_path.empty() && ramp_ok && !bench::write_hgrm(options.hgrm_path, histogram)) {
    std::fprintf(stderr, "bench_client: cannot write %s: %s\n", options.hgrm_path.c_str(),
                 std::strerror(errno));
    return 1;
  }

  if (!ramp_ok && !options.json) {
    std::printf("ramp failed: %" PRIu64 " connect errors, %" PRIu64 " verification errors, %" PRIu64
                " lost connections; nothing measured\n",
                connect_errors, verify_errors, closed_errors);
    return 1;
  }
  if (options.rate > 0) {
    bench::RateResults results;
    results.latency = &histogram;
    results.pacing = &pacing;
    results.tally = tally;
    results.errors = errors;
    results.verify_errors = verify_errors;
    results.connect_errors = connect_errors;
    results.closed_errors = closed_errors;
    results.http_errors = http_errors;
    results.ramp_s = ramp_s;
    results.wall_s = seconds;
    results.client_cpu = client_cpu;
    results.client_user = client_user;
    results.server_cpu = server_cpu;
    results.server_user = server_user;
    if (client_waited_before && client_waited_after)
      results.client_runqueue_wait =
          runqueue_wait_between(*client_waited_before, *client_waited_after);
    if (client_stolen_before && client_stolen_after)
      results.client_cpus_steal = *client_stolen_after - *client_stolen_before;
    if (server_stolen_before && server_stolen_after)
      results.server_cpus_steal = *server_stolen_after - *server_stolen_before;
    if (server_waited_before && server_waited_after)
      results.server_runqueue_wait =
          runqueue_wait_between(*server_waited_before, *server_waited_after);
    results.backend = backend == ucp::BackendKind::kIoUring ? "io_uring" : "epoll";
    bench::print_rate_report(options, results);
    return ramp_ok && errors == 0 && tally.unanswered == 0 ? 0 : 1;
  }

  const double qps = ramp_ok ? static_cast<double>(requests) / seconds : 0;
  if (options.json) {
    std::printf(
        "{\"mode\":\"pingpong\",\"qps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
        "\"max_us\":%.1f,"
        "\"errors\":%" PRIu64 ",\"verify_errors\":%" PRIu64 ",\"connect_errors\":%" PRIu64
        ",\"closed_errors\":%" PRIu64 ",\"http_errors\":%" PRIu64 ",\"requests\":%" PRIu64
        ",\"seconds\":%.3f,\"conns\":%d,\"size\":%zu,\"depth\":%d,\"threads\":%d,"
        "\"ramp_s\":%.3f,\"client_cpu_s\":%.3f,\"client_utime_s\":%.3f,\"server_cpu_s\":%.3f,"
        "\"server_utime_s\":%.3f}\n",
        qps, histogram.percentile_us(0.50), histogram.percentile_us(0.99),
        histogram.percentile_us(0.999), histogram.max_us(), errors, verify_errors, connect_errors,
        closed_errors, http_errors, requests, seconds, options.conns, options.size, options.depth,
        options.threads, ramp_s, client_cpu, client_user, server_cpu, server_user);
  } else {
    if (options.http_path.empty()) {
      std::printf("connections %d (ramped in %.2f s), message %zu B, depth %d, threads %d\n",
                  options.conns, ramp_s, options.size, options.depth, options.threads);
      std::printf("requests %" PRIu64 " in %.2f s: %.0f req/s, %.2f MB/s echoed\n", requests,
                  seconds, qps, static_cast<double>(bytes) / seconds / 1e6);
    } else {
      std::printf("connections %d (ramped in %.2f s), GET %s, depth %d, threads %d\n",
                  options.conns, ramp_s, options.http_path.c_str(), options.depth, options.threads);
      std::printf("requests %" PRIu64 " in %.2f s: %.0f req/s, %.2f MB/s received\n", requests,
                  seconds, qps, static_cast<double>(bytes) / seconds / 1e6);
    }
    std::printf("errors %" PRIu64 " (verification %" PRIu64 ", connect %" PRIu64
                ", lost connections %" PRIu64 ", HTTP status >= 400 %" PRIu64 ")\n",
                errors, verify_errors, connect_errors, closed_errors, http_errors);
    std::printf("latency us: p50 %.1f  p99 %.1f  p999 %.1f  max %.1f\n",
                histogram.percentile_us(0.50), histogram.percentile_us(0.99),
                histogram.percentile_us(0.999), histogram.max_us());
    bench::print_cpu_summary(seconds, client_cpu, client_user, server_cpu, server_user,
                             static_cast<double>(requests), "requests");
  }
  return errors == 0 && ramp_ok ? 0 : 1;
}
