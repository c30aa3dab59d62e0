#include "ucp/net/UdpMetrics.h"

#include <array>

#include "ucp/io/detail/LoopSlots.h"
#include "ucp/metrics/Registry.h"

namespace ucp {

UdpMetrics::UdpMetrics(size_t shards)
    : shards_(shards ? shards : 1),
      owners_(std::make_unique<std::atomic<const EventLoop*>[]>(shards_)),
      datagrams_in_(shards_),
      bytes_in_(shards_),
      truncated_(shards_),
      receive_errors_(shards_),
      datagrams_out_(shards_),
      bytes_out_(shards_),
      send_errors_(shards_),
      segmented_sends_(shards_) {}

Result<void, Error> UdpMetrics::add_to(metrics::Registry& registry, const metrics::Labels& labels) {
  struct Family {
    const char* name;
    const char* help;
    const metrics::Counter& counter;
  };
  const std::array<Family, 8> families{{
      {"ucp_udp_datagrams_received", "UDP datagrams handed to the application.", datagrams_in_},
      {"ucp_udp_bytes_received", "UDP payload bytes handed to the application.", bytes_in_},
      {"ucp_udp_datagrams_truncated",
       "UDP datagrams handed over cut short: longer than the room to receive them.", truncated_},
      {"ucp_udp_receive_errors",
       "UDP receives that ended in an error (an ICMP report on a connected socket...).",
       receive_errors_},
      {"ucp_udp_datagrams_sent", "UDP datagrams the kernel took to send.", datagrams_out_},
      {"ucp_udp_bytes_sent", "UDP payload bytes the kernel took to send.", bytes_out_},
      {"ucp_udp_send_errors", "UDP datagrams the kernel refused to send (each lost).",
       send_errors_},
      {"ucp_udp_segmented_sends",
       "Sends that carried several UDP datagrams as one UDP_SEGMENT (GSO) send.", segmented_sends_},
  }};
  for (size_t i = 0; i < families.size(); ++i) {
    if (auto added = registry.add(families[i].name, families[i].help, labels, families[i].counter);
        !added) {
      for (size_t j = 0; j < i; ++j) registry.remove(families[j].counter);
      return added;
    }
  }
  return {};
}

size_t UdpMetrics::shard_of(const EventLoop& loop) noexcept {
  // More loops than shards: they share the last one.
  return detail::claim_loop_slot(shards_, loop, [&](size_t i) -> auto& { return owners_[i]; });
}

}  // namespace ucp
