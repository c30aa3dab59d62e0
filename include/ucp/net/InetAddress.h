#pragma once
// InetAddress: an IPv4 or IPv6 socket address with a printable form ("1.2.3.4:80").
//
// 28 bytes (a sockaddr_in6), not a 128-byte sockaddr_storage: every connection keeps its
// peer's address, so the difference is paid once per idle connection.

#include <cstdint>
#include <optional>
#include <string>

#include <netinet/in.h>
#include <sys/socket.h>

namespace ucp {

class InetAddress {
 public:
  InetAddress() noexcept = default;
  /// Takes the IPv4 or IPv6 address `storage` holds.
  explicit InetAddress(const sockaddr_storage& storage) noexcept;
  /// Copies `length` bytes of `address` (a getaddrinfo result, say); longer ones are cut.
  InetAddress(const sockaddr* address, socklen_t length) noexcept;
  /// Parses a numeric IPv4/IPv6 address; nullopt if `ip` is not one.
  static std::optional<InetAddress> parse(const std::string& ip, uint16_t port);
  /// The local address of a bound socket.
  static std::optional<InetAddress> local_of(int fd);
  /// The address a connected socket's peer has.
  static std::optional<InetAddress> peer_of(int fd);

  const sockaddr* get() const noexcept { return &storage_.any; }
  socklen_t length() const noexcept;
  int family() const noexcept { return storage_.any.sa_family; }
  uint16_t port() const noexcept;
  std::string to_string() const;
  /// The address alone, without brackets or port: "1.2.3.4", "::1".
  std::string host() const;
  friend bool operator==(const InetAddress& a, const InetAddress& b) noexcept;

 private:
  union Storage {
    sockaddr any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } storage_{};
};

}  // namespace ucp
