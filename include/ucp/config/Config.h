#pragma once
// Config: the typed content of a UCP ini file (SPEC §5). Every key has a default, so an
// empty file is valid. `Config::load` refuses unknown sections or keys, malformed lines,
// bad numbers and out-of-range values with a ConfigError whose message reads
// "FILE:LINE: section.key: what is wrong" (exit 2 in bin/proactor_test).

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ucp/log/Logger.h"

namespace ucp {

/// [server]
struct ServerConfig {
  std::string name = "TcpServer";
  std::string ip = "0.0.0.0";
  uint16_t port = 8888;                 // 0 = any free port (the log line names it)
  uint32_t thread_num = 1;              // worker loops; 0 = one per CPU
  uint32_t read_timeout_ms = 5000;      // idle read timeout; 0 = none
  std::string protocol = "echo";        // echo | http
  uint32_t max_connections = 100000;    // beyond it new connections are closed at once
  uint32_t backlog = 4096;              // listen(2) backlog
  bool reuse_port = false;              // SO_REUSEPORT on the listening socket
  bool tcp_nodelay = true;              // TCP_NODELAY on accepted sockets
  uint32_t shutdown_timeout_ms = 5000;  // graceful stop deadline after SIGINT/SIGTERM
  uint64_t max_output_bytes = 4194304;  // per-connection queued output before the writer waits
  uint32_t max_request_bytes = 65536;   // http: largest request head accepted (else 431)
};

/// [event_loop]
struct EventLoopConfig {
  uint32_t ring_entries = 4096;              // SQ entries per ring (CQ is twice that or more)
  bool sqpoll = false;                       // IORING_SETUP_SQPOLL, one shared kernel thread
  uint32_t sqpoll_idle_ms = 50;              // SQPOLL thread sleeps after this much idle time
  uint32_t registered_buffers_count = 0;     // fixed buffers per worker ring; 0 = off
  uint32_t registered_buffer_size = 4096;
  uint32_t pending_queue_capacity = 65536;   // SQEs waiting when the SQ is full
  bool multishot_recv = true;                // multishot recv + provided buffer ring when probed
  uint32_t provided_buffers_count = 4096;    // buffers in each loop's provided buffer ring
  uint32_t provided_buffer_size = 4096;
  bool defer_taskrun = true;                 // IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN
  bool msg_ring_handoff = false;             // pass accepted fds with IORING_OP_MSG_RING
};

struct Config {
  ServerConfig server;
  EventLoopConfig event_loop;
  LogOptions log;

  /// Reads `path`, then applies `overrides` ("section.key=value", as given to --set).
  /// Throws ConfigError. A missing file is an error unless `path` is empty (defaults).
  static Config load(const std::string& path, const std::vector<std::string>& overrides = {});
  /// Parses ini text; `origin` names it in error messages.
  static Config parse(const std::string& text, const std::string& origin,
                      const std::vector<std::string>& overrides = {});
};

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ucp
