#pragma once
// InetAddress: an IPv4 or IPv6 socket address with a printable form ("1.2.3.4:80").

#include <cstdint>
#include <optional>
#include <string>

#include <netinet/in.h>
#include <sys/socket.h>

namespace ucp {

class InetAddress {
 public:
  InetAddress() noexcept = default;
  explicit InetAddress(const sockaddr_storage& storage) noexcept : storage_(storage) {}
  /// Copies `length` bytes of `address` (a getaddrinfo result, say); longer ones are cut.
  InetAddress(const sockaddr* address, socklen_t length) noexcept;
  /// Parses a numeric IPv4/IPv6 address; nullopt if `ip` is not one.
  static std::optional<InetAddress> parse(const std::string& ip, uint16_t port);
  /// The local address of a bound socket.
  static std::optional<InetAddress> local_of(int fd);

  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const noexcept;
  int family() const noexcept { return storage_.ss_family; }
  uint16_t port() const noexcept;
  std::string to_string() const;
  friend bool operator==(const InetAddress& a, const InetAddress& b) noexcept;

 private:
  sockaddr_storage storage_{};
};

}  // namespace ucp
