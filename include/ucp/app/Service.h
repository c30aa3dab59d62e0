#pragma once
// Service: what Application::serve runs. TcpServer and HttpServer are served as they are
// (Application::serve has an overload for each); a server of another kind (a UDP service, a
// server made of several) implements this interface to get the same life cycle: signals,
// the stats line, exit codes, takeover.
//
// Thread contract: start() and run() on the thread that calls serve() (run() returns once
// the service has stopped); stop(), stop_now() and drain() from its main loop, where the
// runtime's signal watcher and takeover run; the queries from that loop too.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ucp/base/Result.h"
#include "ucp/io/EventLoop.h"

namespace ucp {
class TcpServer;
}

namespace ucp::app {

/// A server Application::serve runs: owned by the program, which keeps it alive until serve()
/// returns. Thread contract as above.
class Service {
 public:
  virtual ~Service() = default;

  /// Sets up (rings, threads, sockets). What failed in one line; features the machine lacks
  /// go to `warnings`, one line each, and the service runs without them.
  virtual Result<void, Error> start(std::string* warnings) = 0;
  /// Serves until stopped.
  virtual void run() = 0;
  /// Graceful stop: stop accepting, let connections finish (bounded), then return from run().
  virtual void stop() noexcept = 0;
  /// Like stop(), without waiting for connections.
  virtual void stop_now() noexcept = 0;
  virtual EventLoop& main_loop() noexcept = 0;
  /// What the "listening on" line names: "127.0.0.1:8888", "[::]:53 (udp)".
  virtual std::string listening() const = 0;
  /// One line naming the backend and what the loops run with.
  virtual std::string describe_loops() const = 0;

  /// Takeover: the listening sockets a successor may accept on in this service's place
  /// (still owned by the service); empty: this service cannot hand over.
  virtual std::vector<int> listening_fds() const { return {}; }
  /// Takeover: stop accepting (the successor accepts on the same sockets now) and let the
  /// connections end; stop() comes once they have, or at server.shutdown_timeout_ms.
  virtual void drain() noexcept {}
  /// Connections open now (takeover waits for 0).
  virtual size_t connection_count() const noexcept { return 0; }

  /// The stats line's source (log.stats_interval_ms); null: no stats line.
  virtual TcpServer* tcp_server() noexcept { return nullptr; }
  /// Requests answered so far, for the stats line; empty: the service counts none.
  virtual std::optional<uint64_t> requests() const { return std::nullopt; }
};

}  // namespace ucp::app
