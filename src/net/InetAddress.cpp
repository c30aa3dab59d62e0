#include "ucp/net/InetAddress.h"

#include <algorithm>
#include <cstring>

#include <arpa/inet.h>

namespace ucp {

std::optional<InetAddress> InetAddress::parse(const std::string& ip, uint16_t port) {
  sockaddr_storage storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return InetAddress(storage);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return InetAddress(storage);
  }
  return std::nullopt;
}

InetAddress::InetAddress(const sockaddr_storage& storage) noexcept {
  std::memcpy(&storage_, &storage, sizeof storage_);
}

InetAddress::InetAddress(const sockaddr* address, socklen_t length) noexcept {
  std::memcpy(&storage_, address, std::min<size_t>(length, sizeof storage_));
}

bool operator==(const InetAddress& a, const InetAddress& b) noexcept {
  return a.length() == b.length() && std::memcmp(a.get(), b.get(), a.length()) == 0;
}

std::optional<InetAddress> InetAddress::local_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return std::nullopt;
  return InetAddress(storage);
}

std::optional<InetAddress> InetAddress::peer_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return std::nullopt;
  return InetAddress(storage);
}

socklen_t InetAddress::length() const noexcept {
  return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t InetAddress::port() const noexcept {
  if (family() == AF_INET6) return ntohs(storage_.v6.sin6_port);
  return ntohs(storage_.v4.sin_port);
}

std::string InetAddress::host() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &storage_.v6.sin6_addr, text, sizeof text);
  } else {
    ::inet_ntop(AF_INET, &storage_.v4.sin_addr, text, sizeof text);
  }
  return text;
}

std::string InetAddress::to_string() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &storage_.v6.sin6_addr, text, sizeof text);
    std::string out = "[";  // appended piecewise: GCC 12 misfires -Wrestrict on a + chain
    out.append(text).append("]:").append(std::to_string(port()));
    return out;
  }
  ::inet_ntop(AF_INET, &storage_.v4.sin_addr, text, sizeof text);
  std::string out(text);
  out.append(":").append(std::to_string(port()));
  return out;
}

}  // namespace ucp
