// log_bench: call-site latency and throughput of UCP's asynchronous logger against spdlog's
// async logger, for 1..N producer threads, both writing a file in the same temp directory.
//
// Each producer logs the same typical server record as fast as it can; every call is timed
// with CLOCK_MONOTONIC (the timer's own cost, printed in the header, is included in every
// sample for both loggers). Throughput counts from the start signal until the logger has
// shut down and every record is in the file. Afterwards the file's lines are counted:
// "lost" is records logged minus records found. Both loggers block when their queue is full
// and get the same queue capacity, so neither wins by dropping.
//
//   log_bench [--json] [--records N] [--threads N] [--repeat N] [--queue N] [--dir PATH]
//             [--only ucp|spdlog]
//
// --repeat runs every (logger, threads) case N times, alternating loggers, and reports the
// median of each statistic.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "ucp/log/Logger.h"

namespace {

struct Config {
  bool json = false;
  int records = 200000;  // per thread
  int max_threads = 4;
  int repeat = 3;
  uint32_t queue = 65536;
  std::string dir;
  std::string only;  // run one logger only (profiling)
};

struct Stats {
  double p50 = 0, p75 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
  double records_per_s = 0;
  double lost = 0;
};

int64_t now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

size_t count_lines(const std::string& path, const char* needle) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// The record both loggers write: a typical "connection accepted" line.
#define BENCH_FORMAT "accepted thread={} seq={} peer={}:{} fd={} bytes={} ratio={:.3f}"
#define BENCH_ARGS(t, i) t, i, "192.168.100.17", 8080, 1000 + (i), (i)*3, 0.25

enum class Which { kUcp, kSpdlog };

// Runs `threads` producers; `log_one(thread, i)` logs one record.
template <class LogOne>
std::vector<std::vector<uint32_t>> run_producers(int threads, int records, LogOne log_one) {
  std::vector<std::vector<uint32_t>> latencies(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto& mine = latencies[static_cast<size_t>(t)];
      mine.resize(static_cast<size_t>(records));  // touch the pages before timing
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < records; ++i) {
        int64_t start = now_ns();
        log_one(t, i);
        mine[static_cast<size_t>(i)] =
            static_cast<uint32_t>(std::min<int64_t>(now_ns() - start, UINT32_MAX));
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& worker : workers) worker.join();
  return latencies;
}

Stats summarise(std::vector<std::vector<uint32_t>>& per_thread, int64_t elapsed_ns, size_t expected,
                size_t found) {
  std::vector<uint32_t> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) {
    return static_cast<double>(
        all[std::min(all.size() - 1, static_cast<size_t>(q * static_cast<double>(all.size())))]);
  };
  Stats s;
  s.p50 = at(0.50);
  s.p75 = at(0.75);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = static_cast<double>(all.back());
  double sum = 0;
  for (auto v : all) sum += v;
  s.mean = sum / static_cast<double>(all.size());
  s.records_per_s = static_cast<double>(expected) * 1e9 / static_cast<double>(elapsed_ns);
  s.lost = static_cast<double>(expected) - static_cast<double>(found);
  return s;
}

Stats run_ucp(const Config& config, int threads, const std::string& path) {
  ucp::LogOptions options;
  options.level = ucp::LogLevel::kInfo;
  options.file = path;
  options.max_size = 0;  // one file, like spdlog's basic_file_sink
  options.console = false;
  options.async = true;
  options.queue_capacity = config.queue;
  options.queue_full_policy = ucp::QueueFullPolicy::kBlock;
  auto logging = ucp::Logger::init(options);
  if (!logging) {
    std::fprintf(stderr, "log_bench: %s\n", logging.error().message.c_str());
    std::exit(1);
  }
  int64_t start = now_ns();
  auto latencies = run_producers(threads, config.records,
                                 [](int t, int i) { LOG_INFO(BENCH_FORMAT, BENCH_ARGS(t, i)); });
  ucp::Logger::shutdown();
  int64_t elapsed = now_ns() - start;
  size_t expected = static_cast<size_t>(threads) * static_cast<size_t>(config.records);
  return summarise(latencies, elapsed, expected, count_lines(path, "accepted thread="));
}

Stats run_spdlog(const Config& config, int threads, const std::string& path) {
  spdlog::init_thread_pool(config.queue, 1);
  auto logger = spdlog::create_async<spdlog::sinks::basic_file_sink_mt>("bench", path, true);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%f %-5l %t %s:%# %v");  // the same fields as UCP
  logger->set_level(spdlog::level::info);
  int64_t start = now_ns();
  auto latencies = run_producers(threads, config.records, [&logger](int t, int i) {
    SPDLOG_LOGGER_INFO(logger, BENCH_FORMAT, BENCH_ARGS(t, i));
  });
  spdlog::shutdown();  // drains the queue and joins the worker
  logger.reset();      // closes (and flushes) the file
  int64_t elapsed = now_ns() - start;
  size_t expected = static_cast<size_t>(threads) * static_cast<size_t>(config.records);
  return summarise(latencies, elapsed, expected, count_lines(path, "accepted thread="));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Stats median_of(const std::vector<Stats>& runs) {
  auto pick = [&](double Stats::*field) {
    std::vector<double> values;
    for (auto& r : runs) values.push_back(r.*field);
    return median(values);
  };
  Stats m;
  m.p50 = pick(&Stats::p50);
  m.p75 = pick(&Stats::p75);
  m.p90 = pick(&Stats::p90);
  m.p99 = pick(&Stats::p99);
  m.p999 = pick(&Stats::p999);
  m.max = pick(&Stats::max);
  m.mean = pick(&Stats::mean);
  m.records_per_s = pick(&Stats::records_per_s);
  m.lost = 0;
  for (auto& r : runs) m.lost = std::max(m.lost, r.lost);  // the worst run, not the median
  return m;
}

int64_t timer_overhead_ns() {
  constexpr int kSamples = 100000;
  int64_t start = now_ns();
  int64_t sink = 0;
  for (int i = 0; i < kSamples; ++i) sink += now_ns();
  int64_t per = (now_ns() - start) / kSamples;
  return sink == 0 ? 0 : per;
}

void usage() {
  std::fprintf(stderr,
               "usage: log_bench [--json] [--records N per thread] [--threads MAX] "
               "[--repeat N] [--queue N] [--dir PATH] [--only ucp|spdlog]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (arg == "--json") {
      config.json = true;
    } else if (arg == "--records") {
      config.records = std::atoi(value().c_str());
    } else if (arg == "--threads") {
      config.max_threads = std::atoi(value().c_str());
    } else if (arg == "--repeat") {
      config.repeat = std::atoi(value().c_str());
    } else if (arg == "--queue") {
      config.queue = static_cast<uint32_t>(std::atol(value().c_str()));
    } else if (arg == "--dir") {
      config.dir = value();
    } else if (arg == "--only") {
      config.only = value();
      if (config.only != "ucp" && config.only != "spdlog") usage();
    } else {
      usage();
    }
  }
  if (config.records <= 0 || config.max_threads <= 0 || config.repeat <= 0 || config.queue == 0) {
    usage();
  }
  std::string base = config.dir;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = std::string(tmp != nullptr ? tmp : "/tmp") + "/ucp_log_bench_XXXXXX";
    if (::mkdtemp(base.data()) == nullptr) {
      std::perror("log_bench: mkdtemp");
      return 1;
    }
  } else {
    std::filesystem::create_directories(base);
  }

  if (!config.json) {
    std::printf("log_bench: %d records/thread, queue %u, median of %d runs, files in %s\n",
                config.records, config.queue, config.repeat, base.c_str());
    std::printf("latency in ns per call (includes ~%lld ns of clock_gettime)\n",
                static_cast<long long>(timer_overhead_ns()));
    std::printf("%-7s %7s %7s %7s %7s %8s %8s %10s %8s %13s %6s\n", "logger", "threads", "p50",
                "p75", "p90", "p99", "p99.9", "max", "mean", "records/s", "lost");
  }
  int file_no = 0;
  for (int threads = 1; threads <= config.max_threads; ++threads) {
    std::vector<Stats> ucp_runs;
    std::vector<Stats> spdlog_runs;
    for (int r = 0; r < config.repeat; ++r) {
      // Alternate which logger goes first so that neither always gets the warmer machine.
      for (int k = 0; k < 2; ++k) {
        Which which = (k == r % 2) ? Which::kUcp : Which::kSpdlog;
        if (!config.only.empty() && config.only != (which == Which::kUcp ? "ucp" : "spdlog")) {
          continue;
        }
        std::string path = base + "/run" + std::to_string(file_no++) + ".log";
        if (which == Which::kUcp) {
          ucp_runs.push_back(run_ucp(config, threads, path));
        } else {
          spdlog_runs.push_back(run_spdlog(config, threads, path));
        }
        std::filesystem::remove(path);
      }
    }
    for (auto [name, runs] : {std::pair{"ucp", &ucp_runs}, std::pair{"spdlog", &spdlog_runs}}) {
      if (runs->empty()) continue;
      Stats s = median_of(*runs);
      if (config.json) {
        std::printf(
            "{\"logger\":\"%s\",\"threads\":%d,\"p50_ns\":%.0f,\"p75_ns\":%.0f,\"p90_ns\":%.0f,"
            "\"p99_ns\":%.0f,\"p999_ns\":%.0f,\"max_ns\":%.0f,\"mean_ns\":%.1f,"
            "\"records_per_s\":%.0f,\"lost\":%.0f}\n",
            name, threads, s.p50, s.p75, s.p90, s.p99, s.p999, s.max, s.mean, s.records_per_s,
            s.lost);
      } else {
        std::printf("%-7s %7d %7.0f %7.0f %7.0f %8.0f %8.0f %10.0f %8.1f %13.0f %6.0f\n", name,
                    threads, s.p50, s.p75, s.p90, s.p99, s.p999, s.max, s.mean, s.records_per_s,
                    s.lost);
      }
      std::fflush(stdout);
    }
  }
  if (config.dir.empty()) std::filesystem::remove_all(base);
  return 0;
}
