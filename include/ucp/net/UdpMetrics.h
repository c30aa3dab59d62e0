#pragma once
// UdpMetrics: what UDP sockets did, for Prometheus: datagrams and payload bytes each way,
// datagrams cut short, receive errors, datagrams the kernel refused to send, and segmented
// sends. Sockets count into it when their UdpOptions point to it:
//
//   ucp::UdpMetrics udp_metrics(workers);                  // a shard per loop
//   (void)udp_metrics.add_to(registry);                    // ucp_udp_* families
//   ucp::UdpOptions options;
//   options.metrics = &udp_metrics;                        // outlives the sockets
//   auto socket = ucp::UdpSocket::bind(loop, address, options);
//
// Families (totals over the loops; add_to's labels on every series):
//   ucp_udp_datagrams_received_total   datagrams handed to the application
//   ucp_udp_bytes_received_total       their payload bytes, as handed over (a cut datagram: the
//                                      bytes kept)
//   ucp_udp_datagrams_truncated_total  datagrams handed over cut short (longer than the room:
//                                      the loop's receive buffer, the pool block, or the
//                                      buffer given to recv_from); also in datagrams_received
//   ucp_udp_receive_errors_total       receives that ended in an error (an ICMP report on a
//                                      connected socket: connection_refused...), not counting
//                                      the operation_canceled of close()
//   ucp_udp_datagrams_sent_total       datagrams the kernel took
//   ucp_udp_bytes_sent_total           their payload bytes
//   ucp_udp_send_errors_total          datagrams the kernel refused (each lost, as
//                                      UdpSocket::send_failures() counts them; a segmented
//                                      send the path refused and that went again one by one
//                                      is not an error)
//   ucp_udp_segmented_sends_total      sendmsg calls that carried several datagrams as one
//                                      UDP_SEGMENT send (UdpOptions::segment_sends)
// Datagrams the kernel drops before a receive (a full SO_RCVBUF) never reach the socket: the
// kernel counts those (/proc/net/snmp, Udp: RcvbufErrors).
//
// A socket finds its shard once, when it is made (shard_of(its loop)): counting is then a
// relaxed load and store per cell (metrics::Counter), no lock, no locked instruction, and a
// socket without metrics pays one predictable branch per receive or send. Sockets on one loop
// share its shard. Give it at least as many shards as loops that have such sockets; past that,
// loops share the last shard and a count may be lost (never torn).
//
// Thread contract: the counting members on the shard's loop (UdpSocket does it); shard_of() and
// the readers from any thread; add_to() before the sockets count. The UdpMetrics must outlive
// the sockets and the registry's scrapes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ucp/base/Result.h"
#include "ucp/metrics/Counter.h"
#include "ucp/metrics/Exposition.h"

namespace ucp {

class EventLoop;

namespace metrics {
class Registry;
}

class UdpMetrics {
 public:
  explicit UdpMetrics(size_t shards);
  UdpMetrics(const UdpMetrics&) = delete;
  UdpMetrics& operator=(const UdpMetrics&) = delete;

  /// Registers the families in `registry`, each series with `labels` (so that several
  /// UdpMetrics, told apart by a label, can share a registry). Error: a series with these
  /// labels is there already, or the labels are not valid; then nothing is registered. Into
  /// a given registry once.
  Result<void, Error> add_to(metrics::Registry& registry, const metrics::Labels& labels = {});

  /// The shard `loop` counts into: the one it claimed before, else the first free one.
  size_t shard_of(const EventLoop& loop) noexcept;

  // Counting (UdpSocket does it), on the thread of the loop that owns `shard`.
  void received(size_t shard, uint64_t datagrams, uint64_t bytes, uint64_t truncated) noexcept {
    datagrams_in_.add(shard, datagrams);
    bytes_in_.add(shard, bytes);
    if (truncated != 0) truncated_.add(shard, truncated);
  }
  void receive_failed(size_t shard) noexcept { receive_errors_.add(shard); }
  void sent(size_t shard, uint64_t datagrams, uint64_t bytes) noexcept {
    datagrams_out_.add(shard, datagrams);
    bytes_out_.add(shard, bytes);
  }
  void send_failed(size_t shard, uint64_t datagrams) noexcept {
    send_errors_.add(shard, datagrams);
  }
  void segmented(size_t shard) noexcept { segmented_sends_.add(shard); }

  // The totals over the shards (any thread).
  uint64_t datagrams_received() const noexcept { return datagrams_in_.value(); }
  uint64_t bytes_received() const noexcept { return bytes_in_.value(); }
  uint64_t truncated() const noexcept { return truncated_.value(); }
  uint64_t receive_errors() const noexcept { return receive_errors_.value(); }
  uint64_t datagrams_sent() const noexcept { return datagrams_out_.value(); }
  uint64_t bytes_sent() const noexcept { return bytes_out_.value(); }
  uint64_t send_errors() const noexcept { return send_errors_.value(); }
  uint64_t segmented_sends() const noexcept { return segmented_sends_.value(); }

 private:
  size_t shards_;
  std::unique_ptr<std::atomic<const EventLoop*>[]> owners_;
  metrics::Counter datagrams_in_;
  metrics::Counter bytes_in_;
  metrics::Counter truncated_;
  metrics::Counter receive_errors_;
  metrics::Counter datagrams_out_;
  metrics::Counter bytes_out_;
  metrics::Counter send_errors_;
  metrics::Counter segmented_sends_;
};

}  // namespace ucp
