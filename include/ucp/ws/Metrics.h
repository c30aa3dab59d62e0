#pragma once
// ws::Metrics: what a server's WebSocket connections did, for Prometheus: connections accepted
// and open, messages and payload bytes each way. A route's Options point to it:
//
//   ucp::ws::Metrics ws_metrics(server.stats().size());     // a shard per worker
//   (void)ws_metrics.add_to(server.enable_metrics());        // ucp_websocket_* families
//   ucp::ws::Options options;
//   options.metrics = &ws_metrics;                           // outlives the server
//   router.get("/chat", ucp::ws::upgrade(options, chat));
//
// Families (totals over the workers): ucp_websocket_connections_total,
// ucp_websocket_connections_open, ucp_websocket_messages_received_total,
// ucp_websocket_messages_sent_total (messages handed to send() while the connection was
// open), ucp_websocket_bytes_received_total and ucp_websocket_bytes_sent_total (message
// payloads, as the application sees them: before compression, after inflation).
//
// Each worker thread counts into a shard of its own (claimed on its first connection, then
// remembered per thread): relaxed loads and stores, no lock, no locked instruction. Give it at
// least as many shards as threads that run WebSocket connections; past that, threads share
// the last shard and a count may be lost (never torn). Connections are those servers accepted;
// messages are counted on any WebSocket whose Options carry the pointer (a client's too).
//
// Thread contract: the counting members on the connections' loops; add_to() before the server
// starts; the Metrics must outlive the connections and the registry's scrapes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ucp/base/Result.h"
#include "ucp/metrics/Counter.h"
#include "ucp/metrics/Gauge.h"

namespace ucp {
class EventLoop;
}
namespace ucp::metrics {
class Registry;
}

namespace ucp::ws {

class Metrics {
 public:
  explicit Metrics(size_t shards);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// Registers the families in `registry`; Error: a name is taken there already.
  Result<void, Error> add_to(metrics::Registry& registry);

  // Counting (the WebSocket does it), on `loop`'s thread.
  void opened(const EventLoop& loop) noexcept;
  void closed(const EventLoop& loop) noexcept;
  void received(const EventLoop& loop, uint64_t bytes) noexcept;
  void sent(const EventLoop& loop, uint64_t bytes) noexcept;

  uint64_t connections() const noexcept { return accepted_.value(); }
  double open() const noexcept { return open_.value(); }
  uint64_t messages_received() const noexcept { return messages_in_.value(); }
  uint64_t messages_sent() const noexcept { return messages_out_.value(); }

 private:
  size_t shard(const EventLoop& loop) noexcept;

  size_t shards_;
  uint64_t id_;  // this object's number, never reused: the per-thread shard memo's key
  std::unique_ptr<std::atomic<const EventLoop*>[]> owners_;
  metrics::Counter accepted_;
  metrics::Gauge open_;
  metrics::Counter messages_in_;
  metrics::Counter messages_out_;
  metrics::Counter bytes_in_;
  metrics::Counter bytes_out_;
};

}  // namespace ucp::ws
