#pragma once
// Connection churn (bench_client --churn): each of CONNS slots connects, does one SIZE-byte
// echo pingpong, closes, and starts over, for SECONDS. It measures the server's connection
// set-up path (accept, hand-off to a worker, first read and write, close), which pingpong
// over long-lived connections never touches, and the client's own connect path (TcpClient).
//
// The load threads are UCP loops (Churn.cpp: one EventLoop per thread, TcpClient) on the
// backend the mode names.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"

#include "BenchSupport.h"

namespace bench {

inline constexpr int64_t kChurnRetryBackoffNs = 10'000'000;  // after a failed connect: no spin
inline constexpr int kChurnMaxReportedErrors = 10;           // errors printed in full

struct ChurnOptions {
  ucp::InetAddress address;
  std::string target;  // HOST:PORT, for messages
  int conns = 1;       // connection slots, each with one connection at a time
  size_t size = 64;
  double seconds = 5;
  int warmup_s = 0;
  int threads = 1;
  bool json = false;
  std::vector<int> server_pids;  // report connections per CPU-second of these processes
  ucp::BackendKind backend = ucp::BackendKind::kEpoll;
};

/// What the main thread sets before the load threads start, and the stop flag.
struct ChurnShared {
  int64_t record_start_ns = 0;  // end of the warm-up: cycles finished before are not counted
  int64_t end_ns = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> reported_errors{0};
};

/// Counters one load thread writes and the main thread reads once per second.
struct alignas(64) ChurnCounters {
  std::atomic<uint64_t> cycles{0};  // connect + echo + close, verified, in the measure phase
  std::atomic<uint64_t> verify_errors{0};
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> closed_errors{0};  // reset or closed by the server before the echo
};

/// One load thread: slots first, first + step, ... until end_ns or stop.
class ChurnThread {
 public:
  virtual ~ChurnThread() = default;
  virtual void run() = 0;
  virtual Histogram& histogram() = 0;
};

/// Runs the churn load on `options.threads` threads and prints the report (one progress line
/// per second, then totals; one JSON object with --json). Returns the exit status: 0 clean,
/// 1 on any verification error, failed connect or lost connection.
int run_churn(const ChurnOptions& options, const std::atomic<bool>& interrupted);

}  // namespace bench
