#pragma once
// What bench_client's pingpong and rate modes share between the main thread (main.cpp: ramp
// progress, the per-second lines, the totals) and the load threads (UcpPingpong.cpp: one UCP
// EventLoop per thread and TcpClient connections; LoopOptions::backend is epoll or io_uring).
//
// A run: ramp (connect everything, one verified warm-up request per connection), an optional
// warm-up at full load, the measure phase, stop. In the measure phase each connection either
// keeps DEPTH requests in flight (closed loop: the next leaves when an answer arrives) or, with
// a rate, sends on a fixed schedule (open loop: request k of connection c is due at
// load_start + (c + k * CONNS) / RATE, one in flight per connection, its latency counted from
// that due time). A request is a SIZE-byte echo message (every echoed byte verified) or, in
// HTTP mode, a keep-alive GET whose response ends with its body.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucp/io/EventLoop.h"
#include "ucp/net/InetAddress.h"
#include "ucp/tls/TlsContext.h"

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
  bool uring = false;             // io_uring loops instead of epoll
  bool uring_by_default = false;  // io_uring because of --rate, not asked for: may fall back
  bool churn = false;             // connection churn instead of pingpong (Churn.h)
  double rate = 0;                // requests per second in total: open loop; 0: closed loop
  std::string http_path;          // non-empty: HTTP GET of this path instead of echo
  std::string hgrm_path;          // where to write the latency distribution (.hgrm)
  bool busy_poll = false;         // the load loops never sleep (each burns its CPU)
  bool tls = false;               // --tls: every connection speaks TLS (the certificate unchecked)
  std::vector<int> server_pids;   // --server-pid, repeatable: their CPU time is summed
  int warmup_s = 0;
};

enum class Phase : int { kRamp, kMeasure, kStop };

/// Written by the main thread, read by the load threads.
struct Shared {
  const Options* options = nullptr;
  ucp::InetAddress address;
  std::shared_ptr<const ucp::tls::TlsContext> tls;  // --tls: one client context for every thread
  std::atomic<Phase> phase{Phase::kRamp};
  std::atomic<int> ramped_threads{0};
  std::atomic<bool> ramp_failed{false};
  std::atomic<int> reported_mismatches{0};
  int64_t load_start_ns = 0;    // the open-loop schedule's time zero
  int64_t record_start_ns = 0;  // end of the warm-up; all three written before phase is kMeasure
  int64_t measure_end_ns = 0;
};

/// Counters one load thread writes and the main thread reads once per second.
struct alignas(64) Counters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> verify_errors{0};
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> closed_errors{0};  // server closed or reset a connection mid-run
  std::atomic<uint64_t> http_errors{0};    // HTTP responses with a status of 400 or more
  std::atomic<int> connected{0};
};

/// What an open-loop (rate) thread counted over the run; read after it finished.
struct RateTally {
  uint64_t scheduled = 0;             // requests due within the measured interval
  uint64_t completed = 0;             // of those, answered (within kDrainMs of the interval's end)
  uint64_t unanswered = 0;            // of those, not answered: recorded at their lower bound
  uint64_t answered_in_interval = 0;  // responses that arrived within the interval
};

/// How long an open-loop run waits after its schedule for the answers still owed.
inline constexpr int64_t kDrainMs = 5000;

/// One load thread's share of the connections: ids first, first + step, ...
class PingpongThread {
 public:
  virtual ~PingpongThread() = default;
  /// Ramps, reports (Shared::ramped_threads, or ramp_failed), waits for the phase to leave
  /// kRamp, measures until measure_end_ns or kStop, closes its connections.
  virtual void run() = 0;
  /// Response latency: closed loop from the write, open loop from the due time.
  virtual Histogram& histogram() = 0;
  /// Open loop: how late the client itself wrote each request (from the later of its due
  /// time and the previous answer on its connection): the client's own share of the latency.
  virtual Histogram& pacing() = 0;
  virtual RateTally tally() const = 0;
};

std::unique_ptr<PingpongThread> make_ucp_pingpong(Shared& shared, Counters& counters,
                                                  const PatternTable& pattern, int first, int step,
                                                  ucp::BackendKind backend);

/// Whether UCP's loops can run on `backend` here (io_uring can be blocked; `why` then says
/// why).
bool ucp_backend_available(ucp::BackendKind backend, std::string* why);

}  // namespace bench
