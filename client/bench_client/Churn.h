#pragma once
// Connection churn (bench_client --churn): each of CONNS slots connects, does one SIZE-byte
// echo pingpong, closes, and starts over, for SECONDS. It measures the server's connection
// set-up path (accept, hand-off to a worker, first read and write, close), which pingpong
// over long-lived connections never touches.

#include <atomic>
#include <cstddef>
#include <string>

#include <netinet/in.h>

namespace bench {

struct ChurnOptions {
  sockaddr_in address{};
  std::string target;  // HOST:PORT, for messages
  int conns = 1;       // connection slots, each with one connection at a time
  size_t size = 64;
  double seconds = 5;
  int warmup_s = 0;
  int threads = 1;
  bool json = false;
  int server_pid = 0;  // > 0: report connections per server-CPU-second
};

/// Runs the churn load on `options.threads` threads and prints the report (one progress line
/// per second, then totals; one JSON object with --json). Returns the exit status: 0 clean,
/// 1 on any verification error, failed connect or lost connection.
int run_churn(const ChurnOptions& options, const std::atomic<bool>& interrupted);

}  // namespace bench
