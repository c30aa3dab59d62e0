#pragma once
// Config: the typed content of a UCP ini file (docs/config.md). Every key has a default, so an
// empty file is valid. `Config::load` refuses unknown sections or keys, malformed lines,
// duplicate keys, bad numbers, out-of-range values and settings whose memory the machine cannot
// have with an Error whose message is one line, "FILE:LINE: section.key: what is wrong"
// (exit 2 in bin/proactor_test).
//
// Format (docs/config.md has the full key table):
//   [section]              a header; the same section may be opened again later
//   key = value            surrounding whitespace trimmed; no quoting
//   # comment / ; comment  on their own line, or after a value when preceded by whitespace
//
// The ranges in the comments below are enforced by the parser; "pow2" means a power of two.
// Beyond them, the memory the settings make the server allocate at start (every worker's
// buffers and ring, and the log queue) must fit in half of the machine's physical memory,
// and so must one connection's worst case (max_output_bytes + 2 x max_request_bytes).

#include <cstdint>
#include <string>
#include <vector>

#include "ucp/base/Defaults.h"
#include "ucp/base/Result.h"
#include "ucp/log/Logger.h"

namespace ucp {

/// [server]
struct ServerConfig {
  std::string name = "TcpServer";   // non-empty; shown in logs
  std::string ip = defaults::kIp;   // numeric IPv4 or IPv6 address (inet_pton): ::1, ::
  uint16_t port = defaults::kPort;  // 0..65535; 0 = any free port (the log line names it)
  uint32_t thread_num = defaults::kThreadNum;           // 0..1024 worker loops; 0 = one per CPU
  uint32_t read_timeout_ms = defaults::kReadTimeoutMs;  // 0..86400000 idle read timeout; 0 = none
  std::string protocol = "echo";                        // echo | http | udp_echo | websocket
  uint32_t max_connections =
      defaults::kMaxConnections;             // 1..16777216; beyond it new connections are closed
  uint32_t backlog = defaults::kBacklog;     // 1..65535 listen(2) backlog (kernel caps: somaxconn)
  bool reuse_port = defaults::kReusePort;    // SO_REUSEPORT: other processes may share the port
  std::string acceptors = "main";            // main | per_worker: who accepts (docs/config.md)
  bool tcp_nodelay = defaults::kTcpNoDelay;  // TCP_NODELAY on accepted sockets
  uint32_t shutdown_timeout_ms =
      defaults::kShutdownTimeoutMs;  // 0..3600000 graceful stop deadline after SIGINT/TERM
  uint64_t max_output_bytes =
      defaults::kMaxOutputBytes;  // 1024..4294967296 queued output before the writer waits
  uint32_t write_timeout_ms =
      defaults::kWriteTimeoutMs;             // 0..86400000 peer takes no output this long; 0 = none
  uint32_t max_request_bytes = 65536;        // 1024..16777216 http: largest request head (else 431)
  uint32_t udp_recv_buffer_bytes = 4194304;  // 0..1073741824 udp_echo: SO_RCVBUF; 0 = kernel's

  bool operator==(const ServerConfig&) const = default;
};

/// [event_loop]
struct EventLoopConfig {
  std::string backend = "auto";  // auto | io_uring | epoll (auto: epoll where
                                 // io_uring is blocked, with one WARN saying why)
  uint32_t ring_entries =
      defaults::kRingEntries;       // pow2 8..32768 SQ entries per ring (CQ: 2x or more)
  bool sqpoll = defaults::kSqpoll;  // IORING_SETUP_SQPOLL, one shared kernel thread
  uint32_t sqpoll_idle_ms =
      defaults::kSqpollIdleMs;  // 0..60000 SQPOLL thread sleeps after this idle time
  uint32_t registered_buffers_count =
      defaults::kRegisteredBuffersCount;  // 0..16384 fixed buffers per worker ring; 0 = off
  uint32_t registered_buffer_size = defaults::kRegisteredBufferSize;  // 64..1048576 bytes each
  uint32_t pending_queue_capacity =
      defaults::kPendingQueueCapacity;  // 0..16777216 SQEs waiting when the SQ is full
  bool multishot_recv =
      defaults::kMultishotRecv;  // multishot recv + provided buffer ring when probed
  uint32_t provided_buffers_count =
      defaults::kProvidedBuffersCount;  // pow2 1..32768 buffers in each loop's buffer ring
  uint32_t provided_buffer_size = defaults::kProvidedBufferSize;  // 64..1048576 bytes each
  bool defer_taskrun = defaults::kDeferTaskrun;  // IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN
  uint32_t cqe_batch = defaults::kCqeBatch;  // 0..65536 CQEs handled per loop iteration; 0 = all
  bool msg_ring_handoff = defaults::kMsgRingHandOff;  // pass accepted fds with IORING_OP_MSG_RING

  bool operator==(const EventLoopConfig&) const = default;
};

/// [http]: bin/http_server (and proactor_test's http protocol): limits and timeouts of the
/// HTTP/1.1 layer, and where static files come from.
struct HttpConfig {
  std::string root = "www";          // non-empty; static files, relative to the cwd
  std::string index = "index.html";  // non-empty file name (no '/'): a directory's page
  uint32_t max_request_line_bytes =
      defaults::kMaxRequestLineBytes;  // 256..1048576 method + target + version (else 414)
  uint32_t max_header_bytes = defaults::kMaxHeaderBytes;  // 1024..16777216 header fields (else 431)
  uint64_t max_body_bytes = defaults::kMaxBodyBytes;      // 0..1073741824 request body (else 413)
  uint32_t header_timeout_ms =
      defaults::kHeaderTimeoutMs;  // 0..3600000 first byte to end of head (408); 0 = none
  uint32_t keepalive_timeout_ms =
      defaults::kKeepaliveTimeoutMs;  // 0..86400000 idle keep-alive connection; 0 = none
  uint32_t send_timeout_ms =
      defaults::kSendTimeoutMs;  // 0..86400000 peer takes nothing this long; 0 = none

  bool operator==(const HttpConfig&) const = default;
};

/// [log]: the logger's options (ucp::LogOptions, log/Logger.h: level TRACE..FATAL, file (empty
/// = no file), max_size 0..1099511627776 (0 = never roll), max_files 0..1000, daily, async,
/// console, flush_interval_ms 1..60000, queue_capacity 16..16777216, queue_full_policy
/// block | drop), and what the server binaries log on their own.
struct LogConfig : LogOptions {
  uint32_t stats_interval_ms = 0;  // 0..86400000 one stats line at INFO this often; 0 = none
};

/// The machine a configuration is checked against.
struct MachineLimits {
  uint64_t memory_bytes = 0;  // physical memory; 0 = unknown (no memory checks)
  uint32_t cpus = 1;          // what server.thread_num = 0 stands for

  /// This machine: physical pages x page size, and std::thread::hardware_concurrency().
  static MachineLimits current();
};

/// One key whose value differs between two configurations (Config::changes).
struct ConfigChange {
  std::string key;  // "section.key"
  std::string from;
  std::string to;  // values as a config file spells them
};

/// The whole configuration, a plain value: build it once on the main thread, then copy or
/// read it from anywhere. Nothing here is synchronized.
struct Config {
  /// The largest config file `load` reads: a config is a few KiB; anything larger is a
  /// wrong path (a log, a device), refused before it is read.
  static constexpr uint64_t kMaxFileBytes = 1024 * 1024;

  ServerConfig server;
  EventLoopConfig event_loop;
  LogConfig log;
  HttpConfig http;

  /// Reads `path` (a regular file of at most kMaxFileBytes), then applies `overrides`
  /// ("section.key=value", as given to --set), then checks the memory the result needs
  /// against `machine`. A missing file is an error unless `path` is empty (defaults). The
  /// Error's message is one line:
  ///   "FILE:LINE: section.key: what is wrong"  ("--set:N: ..." for the N-th override)
  ///   "FILE: cannot open: <reason>", "FILE: not a regular file", "FILE: N bytes is larger..."
  /// A check across keys names the line of the key set last among them, and the others in the
  /// text. The caller prints it and exits 2.
  static Result<Config, Error> load(const std::string& path,
                                    const std::vector<std::string>& overrides = {},
                                    const MachineLimits& machine = MachineLimits::current());
  /// Parses ini text; `origin` names it in error messages.
  static Result<Config, Error> parse(const std::string& text, const std::string& origin,
                                     const std::vector<std::string>& overrides = {},
                                     const MachineLimits& machine = MachineLimits::current());

  /// The keys whose values differ from `from` to `to`, in the order of docs/config.md.
  static std::vector<ConfigChange> changes(const Config& from, const Config& to);

  /// udp_echo's receive buffers: one datagram per buffer, so a buffer holds the largest UDP
  /// payload (65,527 bytes) and its 48-byte header: 17 pages. At most kUdpEchoBuffers of them
  /// per worker (71 MiB of address space; pages become resident as datagrams touch them).
  static constexpr uint32_t kUdpEchoBufferBytes = 69632;
  static constexpr uint32_t kUdpEchoBuffers = 1024;
  /// The [event_loop] settings the worker loops run with: event_loop as configured, except that
  /// udp_echo raises provided_buffer_size to kUdpEchoBufferBytes (and caps the count at
  /// kUdpEchoBuffers) when it is smaller, so that every datagram fits a receive buffer.
  EventLoopConfig worker_loop() const noexcept;

  /// Worker loops the server runs: server.thread_num, or one per CPU when it is 0.
  uint32_t worker_count(const MachineLimits& machine) const noexcept;
  /// Bytes each worker loop maps when it starts: its provided buffers (with multishot_recv)
  /// and their ring, its registered buffers (pinned at once) and its io_uring. Pages of the
  /// provided buffers become resident only as data arrives in them.
  uint64_t worker_startup_bytes() const noexcept;
  /// Bytes the process allocates once at start besides the workers: the log queue (async
  /// logging) and the accepting loop's io_uring.
  uint64_t shared_startup_bytes() const noexcept;
  /// worker_count x worker_startup_bytes + shared_startup_bytes.
  uint64_t startup_bytes(const MachineLimits& machine) const noexcept;
};

}  // namespace ucp
