#pragma once
// Multicast: what a UdpSocket joins to receive a multicast feed (UdpSocket::join, leave), and
// the interface it is received and sent on.
//
//   ucp::MulticastGroup feed;
//   feed.group = *ucp::InetAddress::parse("239.1.2.3", 0);
//   feed.interface = "127.0.0.1";                      // or "eth0", or "" (the kernel's choice)
//   auto socket = ucp::UdpSocket::bind(loop, *ucp::InetAddress::parse("0.0.0.0", 30001));
//   if (auto joined = (*socket)->join(feed); !joined) { /* joined.error() */ }
//
// Any-source (ASM) when `source` is empty, source-specific (SSM: only datagrams from that
// sender, the model of 232.0.0.0/8 and ff3x::/32) when it is set. IPv4 and IPv6 alike, through
// the protocol-independent MCAST_JOIN_GROUP / MCAST_JOIN_SOURCE_GROUP requests; the group's
// family must be the socket's.
//
// An interface is named by a local address it has ("192.0.2.7", "::1"), by its name ("eth0",
// "lo"), or not at all (the kernel picks the one its route to the group says). Over loopback
// IPv4 multicast works on "127.0.0.1"; IPv6 multicast on lo needs a route the kernel does not
// add by itself (`ip -6 route add multicast ff00::/8 dev lo table local`).
//
// Thread contract: plain values and functions, any thread.

#include <optional>
#include <string>
#include <string_view>

#include "ucp/base/Result.h"
#include "ucp/net/InetAddress.h"

namespace ucp {

/// One membership: a group, the interface it is joined on, and (SSM) the one sender heard.
struct MulticastGroup {
  InetAddress group;                  // 224.0.0.0/4 or ff00::/8; its port is not used
  std::optional<InetAddress> source;  // SSM: only this sender (same family); empty: any
  std::string interface;              // a local address or an interface name; empty: any
};

/// Whether `address` is a multicast address (IPv4 224.0.0.0/4, IPv6 ff00::/8).
bool is_multicast(const InetAddress& address) noexcept;

/// The index of the interface `interface` names (see above): 0 for an empty name; ENODEV when
/// no interface has that name, EADDRNOTAVAIL when none has that address.
Result<unsigned> interface_index(std::string_view interface);

}  // namespace ucp
