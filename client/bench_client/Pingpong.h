#pragma once
// What bench_client's pingpong mode shares between its main thread (main.cpp: ramp progress,
// the per-second lines, the totals) and its load threads (UcpPingpong.cpp: one UCP EventLoop
// per thread and TcpClient connections; --uring picks the io_uring backend, the default the
// epoll one, LoopOptions::backend).
//
// A run: ramp (connect everything, one verified warm-up echo per connection), an optional
// warm-up at full load, the measure phase (DEPTH messages in flight per connection, every
// echoed byte verified, one latency sample per message), stop.

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

inline constexpr int kMaxConnectsInFlight = 256;   // per thread: keeps the server's SYN queue sane
inline constexpr int64_t kConnectRetryMs = 5000;   // how long a refused connect is retried
inline constexpr int64_t kRetryBackoffMs = 10;     // pause before retrying a refused connect
inline constexpr int kMaxReportedMismatches = 10;  // verification errors printed in full

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int conns = 1;
  size_t size = 64;
  double seconds = 5;
  int depth = 1;
  int threads = 1;
  bool json = false;
  bool uring = false;            // io_uring loops instead of epoll
  bool churn = false;            // connection churn instead of pingpong (Churn.h)
  std::vector<int> server_pids;  // --server-pid, repeatable: their CPU time is summed
  int warmup_s = 0;
};

enum class Phase : int { kRamp, kMeasure, kStop };

/// Written by the main thread, read by the load threads.
struct Shared {
  const Options* options = nullptr;
  ucp::InetAddress address;
  std::atomic<Phase> phase{Phase::kRamp};
  std::atomic<int> ramped_threads{0};
  std::atomic<bool> ramp_failed{false};
  std::atomic<int> reported_mismatches{0};
  int64_t record_start_ns = 0;  // end of the warm-up; both written before phase is kMeasure
  int64_t measure_end_ns = 0;
};

/// Counters one load thread writes and the main thread reads once per second.
struct alignas(64) Counters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> verify_errors{0};
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> closed_errors{0};  // server closed or reset a connection mid-run
  std::atomic<int> connected{0};
};

/// One load thread's share of the connections: ids first, first + step, ...
class PingpongThread {
 public:
  virtual ~PingpongThread() = default;
  /// Ramps, reports (Shared::ramped_threads, or ramp_failed), waits for the phase to leave
  /// kRamp, measures until measure_end_ns or kStop, closes its connections.
  virtual void run() = 0;
  virtual Histogram& histogram() = 0;
};

std::unique_ptr<PingpongThread> make_ucp_pingpong(Shared& shared, Counters& counters,
                                                  const PatternTable& pattern, int first, int step,
                                                  ucp::BackendKind backend);

/// Whether UCP's loops can run on `backend` here (io_uring can be blocked; `why` then says
/// why).
bool ucp_backend_available(ucp::BackendKind backend, std::string* why);

}  // namespace bench
