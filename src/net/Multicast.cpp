// Multicast membership and sending options of UdpSocket (ucp/net/Multicast.h).

#include "ucp/net/Multicast.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ucp/net/UdpSocket.h"

namespace ucp {
namespace {

bool same_address(const sockaddr* a, const InetAddress& b) noexcept {
  if (a == nullptr || a->sa_family != b.family()) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b.get())->sin_addr.s_addr;
  }
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b.get())->sin6_addr,
                     sizeof(in6_addr)) == 0;
}

int level_of(int family) noexcept { return family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP; }

// The socket's address family (bound or not).
int family_of(int fd) noexcept {
  int family = AF_UNSPEC;
  socklen_t length = sizeof family;
  ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &length);
  return family;
}

Result<void> set_option(int fd, int level, int name, const void* value, socklen_t length) {
  if (::setsockopt(fd, level, name, value, length) != 0) {
    return Unexpected{error_from_errno(errno)};
  }
  return {};
}

// MCAST_{JOIN,LEAVE}_GROUP or, with a source, MCAST_{JOIN,LEAVE}_SOURCE_GROUP.
Result<void> change_membership(int fd, int family, const MulticastGroup& group, bool join) {
  if (group.group.family() != family || !is_multicast(group.group) ||
      (group.source && group.source->family() != family)) {
    return Unexpected{make_error_code(std::errc::invalid_argument)};
  }
  auto index = interface_index(group.interface);
  if (!index) return Unexpected{index.error()};
  const int level = level_of(family);
  if (!group.source) {
    group_req request{};
    request.gr_interface = *index;
    std::memcpy(&request.gr_group, group.group.get(), group.group.length());
    return set_option(fd, level, join ? MCAST_JOIN_GROUP : MCAST_LEAVE_GROUP, &request,
                      sizeof request);
  }
  group_source_req request{};
  request.gsr_interface = *index;
  std::memcpy(&request.gsr_group, group.group.get(), group.group.length());
  std::memcpy(&request.gsr_source, group.source->get(), group.source->length());
  return set_option(fd, level, join ? MCAST_JOIN_SOURCE_GROUP : MCAST_LEAVE_SOURCE_GROUP, &request,
                    sizeof request);
}

}  // namespace

bool is_multicast(const InetAddress& address) noexcept {
  if (address.family() == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(address.get());
    return IN_MULTICAST(ntohl(a->sin_addr.s_addr));
  }
  if (address.family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(address.get());
    return IN6_IS_ADDR_MULTICAST(&a->sin6_addr);
  }
  return false;
}

Result<unsigned> interface_index(std::string_view interface) {
  if (interface.empty()) return 0u;
  const std::string name(interface);
  const auto address = InetAddress::parse(name, 0);
  if (!address) {
    const unsigned index = ::if_nametoindex(name.c_str());
    if (index == 0) return Unexpected{error_from_errno(ENODEV)};
    return index;
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Unexpected{error_from_errno(errno)};
  unsigned index = 0;
  for (const ifaddrs* entry = list; entry != nullptr && index == 0; entry = entry->ifa_next) {
    if (same_address(entry->ifa_addr, *address)) index = ::if_nametoindex(entry->ifa_name);
  }
  ::freeifaddrs(list);
  if (index == 0) return Unexpected{error_from_errno(EADDRNOTAVAIL)};
  return index;
}

Result<void> UdpSocket::join(const MulticastGroup& group) {
  return change_membership(fd_.get(), family_of(fd_.get()), group, true);
}

Result<void> UdpSocket::leave(const MulticastGroup& group) {
  return change_membership(fd_.get(), family_of(fd_.get()), group, false);
}

Result<void> UdpSocket::set_multicast_interface(std::string_view interface) {
  auto index = interface_index(interface);
  if (!index) return Unexpected{index.error()};
  if (family_of(fd_.get()) == AF_INET6) {
    const int value = static_cast<int>(*index);
    return set_option(fd_.get(), IPPROTO_IPV6, IPV6_MULTICAST_IF, &value, sizeof value);
  }
  // By index, and by address where one was named: the datagrams then carry that source.
  ip_mreqn request{};
  request.imr_ifindex = static_cast<int>(*index);
  if (const auto address = InetAddress::parse(std::string(interface), 0)) {
    request.imr_address = reinterpret_cast<const sockaddr_in*>(address->get())->sin_addr;
  }
  return set_option(fd_.get(), IPPROTO_IP, IP_MULTICAST_IF, &request, sizeof request);
}

Result<void> UdpSocket::set_multicast_loopback(bool on) {
  const int value = on ? 1 : 0;
  if (family_of(fd_.get()) == AF_INET6) {
    return set_option(fd_.get(), IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &value, sizeof value);
  }
  return set_option(fd_.get(), IPPROTO_IP, IP_MULTICAST_LOOP, &value, sizeof value);
}

Result<void> UdpSocket::set_multicast_hops(int hops) {
  if (hops < 0 || hops > 255) return Unexpected{make_error_code(std::errc::invalid_argument)};
  if (family_of(fd_.get()) == AF_INET6) {
    return set_option(fd_.get(), IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops);
  }
  return set_option(fd_.get(), IPPROTO_IP, IP_MULTICAST_TTL, &hops, sizeof hops);
}

}  // namespace ucp
