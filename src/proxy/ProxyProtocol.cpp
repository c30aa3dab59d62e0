#include "ucp/proxy/ProxyProtocol.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <arpa/inet.h>

#include "ucp/io/WithTimeout.h"

namespace ucp::proxy {
namespace {

// v2 signature: \r\n\r\n\0\r\nQUIT\n, then 0x2_ (version 2).
constexpr std::array<uint8_t, 12> kV2Signature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                  0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr std::string_view kV1Prefix = "PROXY ";
constexpr size_t kV2HeaderBytes = 16;

ProxyParse refuse(std::string* why, const char* what) {
  if (why != nullptr) *why = what;
  return ProxyParse::kInvalid;
}

// A decimal in [0, max] without leading zeros ("0" itself is fine).
bool parse_decimal(std::string_view text, uint32_t max, uint32_t& out) {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text[0] == '0')) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > max) return false;
  out = value;
  return true;
}

// Four decimal octets, no leading zeros, as the specification writes them.
bool parse_ipv4(std::string_view text, in_addr& out) {
  uint8_t bytes[4];
  for (int i = 0; i < 4; ++i) {
    const size_t dot = i < 3 ? text.find('.') : text.size();
    if (dot == std::string_view::npos) return false;
    uint32_t octet = 0;
    if (!parse_decimal(text.substr(0, dot), 255, octet)) return false;
    bytes[i] = static_cast<uint8_t>(octet);
    text.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  std::memcpy(&out, bytes, 4);
  return true;
}

// Hex groups and colons (one "::" at most), 128 bits: inet_pton, without the dotted-quad tail
// it would also take.
bool parse_ipv6(std::string_view text, in6_addr& out) {
  if (text.empty() || text.size() > 39) return false;
  const bool hex_and_colons = std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':';
  });
  if (!hex_and_colons) return false;
  char copy[40];
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  return ::inet_pton(AF_INET6, copy, &out) == 1;
}

InetAddress make_v4(const in_addr& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons(port);
  return InetAddress(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

InetAddress make_v6(const in6_addr& ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = ip;
  a.sin6_port = htons(port);
  return InetAddress(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

ProxyParse parse_v1(std::span<const std::byte> bytes, ProxyHeader& header, std::string* why) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              std::min(bytes.size(), kProxyV1MaxBytes));
  // Every byte up to the CRLF must be printable ASCII; a lone CR or LF ends nothing.
  size_t end = std::string_view::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\r') {
      if (i + 1 == text.size()) break;  // its LF may come next
      if (text[i + 1] != '\n') return refuse(why, "a CR not followed by LF in the v1 line");
      end = i;
      break;
    }
    if (c < 0x20 || c > 0x7e) return refuse(why, "a control or non-ASCII byte in the v1 line");
  }
  if (end == std::string_view::npos) {
    if (bytes.size() >= kProxyV1MaxBytes) return refuse(why, "no CRLF within 107 bytes");
    return ProxyParse::kIncomplete;
  }
  std::string_view line = text.substr(kV1Prefix.size(), end - kV1Prefix.size());
  header = ProxyHeader{};
  header.version = 1;
  header.length = end + 2;
  const size_t space = line.find(' ');
  const std::string_view protocol = line.substr(0, space);
  if (protocol == "UNKNOWN") return ProxyParse::kDone;  // whatever follows is ignored
  if (protocol != "TCP4" && protocol != "TCP6") {
    return refuse(why, "the v1 protocol is not TCP4, TCP6 or UNKNOWN");
  }
  std::string_view fields[4];
  line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
  for (int i = 0; i < 4; ++i) {
    const size_t next = line.find(' ');
    if ((i < 3) == (next == std::string_view::npos)) {
      return refuse(why, "a v1 line needs exactly four fields after the protocol");
    }
    fields[i] = line.substr(0, next);
    line.remove_prefix(i < 3 ? next + 1 : line.size());
  }
  uint32_t source_port = 0;
  uint32_t destination_port = 0;
  if (!parse_decimal(fields[2], 65535, source_port) ||
      !parse_decimal(fields[3], 65535, destination_port)) {
    return refuse(why, "a v1 port is not a decimal 0..65535 without leading zeros");
  }
  if (protocol == "TCP4") {
    in_addr source{}, destination{};
    if (!parse_ipv4(fields[0], source) || !parse_ipv4(fields[1], destination)) {
      return refuse(why, "a TCP4 address is not four decimal octets");
    }
    header.source = make_v4(source, static_cast<uint16_t>(source_port));
    header.destination = make_v4(destination, static_cast<uint16_t>(destination_port));
  } else {
    in6_addr source{}, destination{};
    if (!parse_ipv6(fields[0], source) || !parse_ipv6(fields[1], destination)) {
      return refuse(why, "a TCP6 address is not an IPv6 address");
    }
    header.source = make_v6(source, static_cast<uint16_t>(source_port));
    header.destination = make_v6(destination, static_cast<uint16_t>(destination_port));
  }
  header.local = false;
  return ProxyParse::kDone;
}

uint16_t read_be16(const std::byte* p) {
  return static_cast<uint16_t>((static_cast<uint16_t>(p[0]) << 8) | static_cast<uint16_t>(p[1]));
}

ProxyParse parse_v2(std::span<const std::byte> bytes, ProxyHeader& header, std::string* why) {
  if (bytes.size() > 12) {
    const auto version_command = static_cast<uint8_t>(bytes[12]);
    if ((version_command >> 4) != 2) return refuse(why, "the v2 version is not 2");
    if ((version_command & 0x0F) > 1) return refuse(why, "the v2 command is not LOCAL or PROXY");
  }
  if (bytes.size() > 13) {
    switch (static_cast<uint8_t>(bytes[13])) {
      case 0x00:
      case 0x11:
      case 0x12:
      case 0x21:
      case 0x22:
      case 0x31:
      case 0x32:
        break;
      default:
        return refuse(why, "an unknown v2 address family or protocol");
    }
  }
  if (bytes.size() < kV2HeaderBytes) return ProxyParse::kIncomplete;
  const size_t total = kV2HeaderBytes + read_be16(bytes.data() + 14);
  if (total > kMaxProxyHeaderBytes) return refuse(why, "a v2 header longer than accepted");
  if (bytes.size() < total) return ProxyParse::kIncomplete;

  const bool proxy_command = (static_cast<uint8_t>(bytes[12]) & 0x0F) == 1;
  const auto family = static_cast<uint8_t>(bytes[13]);
  const std::byte* block = bytes.data() + kV2HeaderBytes;
  const size_t block_length = total - kV2HeaderBytes;
  size_t needed = 0;
  switch (family >> 4) {
    case 1:
      needed = 12;
      break;
    case 2:
      needed = 36;
      break;
    case 3:
      needed = 216;
      break;
  }
  if (block_length < needed) return refuse(why, "a v2 address block shorter than its family");
  // TLVs: type, 16-bit length, value; they must tile the rest of the block exactly.
  for (size_t at = needed; at < block_length;) {
    if (block_length - at < 3) return refuse(why, "a truncated v2 TLV");
    const size_t length = read_be16(block + at + 1);
    if (block_length - at - 3 < length) return refuse(why, "a v2 TLV longer than the header");
    at += 3 + length;
  }
  header = ProxyHeader{};
  header.version = 2;
  header.length = total;
  if (!proxy_command) return ProxyParse::kDone;  // LOCAL: the family is ignored
  if (family == 0x11) {
    in_addr source{}, destination{};
    std::memcpy(&source, block, 4);
    std::memcpy(&destination, block + 4, 4);
    header.source = make_v4(source, read_be16(block + 8));
    header.destination = make_v4(destination, read_be16(block + 10));
    header.local = false;
  } else if (family == 0x21) {
    in6_addr source{}, destination{};
    std::memcpy(&source, block, 16);
    std::memcpy(&destination, block + 16, 16);
    header.source = make_v6(source, read_be16(block + 32));
    header.destination = make_v6(destination, read_be16(block + 34));
    header.local = false;
  }
  return ProxyParse::kDone;  // UNSPEC, UDP, UNIX: the connection's own endpoints stand
}

// An IPv4 address as IPv4-mapped IPv6, for headers whose two ends differ in family.
InetAddress mapped_v6(const InetAddress& address) {
  if (address.family() != AF_INET) return address;
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(address.get());
  in6_addr ip{};
  ip.s6_addr[10] = 0xff;
  ip.s6_addr[11] = 0xff;
  std::memcpy(ip.s6_addr + 12, &v4->sin_addr, 4);
  return make_v6(ip, ntohs(v4->sin_port));
}

bool is_inet(const InetAddress& a) { return a.family() == AF_INET || a.family() == AF_INET6; }

// RFC 5952 text of an IPv6 address, but always in hex groups: inet_ntop writes IPv4-mapped
// addresses with a dotted quad ("::ffff:10.0.0.1"), which a strict v1 receiver refuses.
void format_ipv6(const in6_addr& ip, char (&out)[INET6_ADDRSTRLEN]) {
  uint16_t groups[8];
  for (int i = 0; i < 8; ++i) {
    groups[i] = static_cast<uint16_t>((ip.s6_addr[2 * i] << 8) | ip.s6_addr[2 * i + 1]);
  }
  int best = -1, best_length = 1;  // the longest run of two or more zero groups
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && groups[j] == 0) ++j;
    if (j - i > best_length) {
      best = i;
      best_length = j - i;
    }
    i = j == i ? i + 1 : j;
  }
  size_t at = 0;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out[at++] = ':';
      if (i == 0) out[at++] = ':';
      i += best_length - 1;
      continue;
    }
    at += static_cast<size_t>(std::snprintf(out + at, sizeof out - at, "%x", groups[i]));
    if (i < 7) out[at++] = ':';
  }
  out[at] = '\0';
}

}  // namespace

ProxyParse parse_proxy_header(std::span<const std::byte> bytes, ProxyHeader& header,
                              std::string* why) {
  if (bytes.empty()) return ProxyParse::kIncomplete;
  if (static_cast<char>(bytes[0]) == 'P') {
    const size_t n = std::min(bytes.size(), kV1Prefix.size());
    if (std::memcmp(bytes.data(), kV1Prefix.data(), n) != 0) {
      return refuse(why, "not a PROXY header");
    }
    if (bytes.size() <= kV1Prefix.size()) return ProxyParse::kIncomplete;
    return parse_v1(bytes, header, why);
  }
  const size_t n = std::min(bytes.size(), kV2Signature.size());
  if (std::memcmp(bytes.data(), kV2Signature.data(), n) != 0) {
    return refuse(why, "not a PROXY header");
  }
  return parse_v2(bytes, header, why);
}

size_t encode_proxy_v1(const InetAddress& source, const InetAddress& destination,
                       std::span<char> out) noexcept {
  constexpr std::string_view kUnknown = "PROXY UNKNOWN\r\n";
  if (out.size() < kProxyV1MaxBytes) return 0;
  if (!is_inet(source) || !is_inet(destination)) {
    std::memcpy(out.data(), kUnknown.data(), kUnknown.size());
    return kUnknown.size();
  }
  const bool v4 = source.family() == AF_INET && destination.family() == AF_INET;
  const InetAddress from = v4 ? source : mapped_v6(source);
  const InetAddress to = v4 ? destination : mapped_v6(destination);
  char source_text[INET6_ADDRSTRLEN];
  char destination_text[INET6_ADDRSTRLEN];
  if (v4) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(from.get())->sin_addr, source_text,
                sizeof source_text);
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(to.get())->sin_addr,
                destination_text, sizeof destination_text);
  } else {
    format_ipv6(reinterpret_cast<const sockaddr_in6*>(from.get())->sin6_addr, source_text);
    format_ipv6(reinterpret_cast<const sockaddr_in6*>(to.get())->sin6_addr, destination_text);
  }
  // Always fits: 104 bytes at most for TCP6 (the specification's own count).
  const int n =
      std::snprintf(out.data(), out.size(), "PROXY %s %s %s %u %u\r\n", v4 ? "TCP4" : "TCP6",
                    source_text, destination_text, unsigned{from.port()}, unsigned{to.port()});
  return n > 0 ? static_cast<size_t>(n) : 0;
}

size_t encode_proxy_v2_local(std::span<std::byte> out) noexcept {
  if (out.size() < kV2HeaderBytes) return 0;
  std::memcpy(out.data(), kV2Signature.data(), kV2Signature.size());
  out[12] = std::byte{0x20};  // version 2, LOCAL
  out[13] = std::byte{0x00};  // UNSPEC
  out[14] = std::byte{0};
  out[15] = std::byte{0};
  return kV2HeaderBytes;
}

size_t encode_proxy_v2(const InetAddress& source, const InetAddress& destination,
                       std::span<std::byte> out) noexcept {
  if (out.size() < kProxyV2MaxEncoded) return 0;
  if (!is_inet(source) || !is_inet(destination)) return encode_proxy_v2_local(out);
  std::memcpy(out.data(), kV2Signature.data(), kV2Signature.size());
  out[12] = std::byte{0x21};  // version 2, PROXY
  std::byte* block = out.data() + kV2HeaderBytes;
  const auto put_port = [](std::byte* at, uint16_t port) {
    at[0] = static_cast<std::byte>(port >> 8);
    at[1] = static_cast<std::byte>(port & 0xff);
  };
  size_t length = 0;
  if (source.family() == AF_INET && destination.family() == AF_INET) {
    const auto* from = reinterpret_cast<const sockaddr_in*>(source.get());
    const auto* to = reinterpret_cast<const sockaddr_in*>(destination.get());
    out[13] = std::byte{0x11};  // TCP over IPv4
    std::memcpy(block, &from->sin_addr, 4);
    std::memcpy(block + 4, &to->sin_addr, 4);
    put_port(block + 8, source.port());
    put_port(block + 10, destination.port());
    length = 12;
  } else {
    const InetAddress from = mapped_v6(source);
    const InetAddress to = mapped_v6(destination);
    out[13] = std::byte{0x21};  // TCP over IPv6
    std::memcpy(block, &reinterpret_cast<const sockaddr_in6*>(from.get())->sin6_addr, 16);
    std::memcpy(block + 16, &reinterpret_cast<const sockaddr_in6*>(to.get())->sin6_addr, 16);
    put_port(block + 32, from.port());
    put_port(block + 34, to.port());
    length = 36;
  }
  out[14] = std::byte{0};
  out[15] = static_cast<std::byte>(length);
  return kV2HeaderBytes + length;
}

Task<Result<ProxyHeader>> read_proxy_header(TcpConnection& connection, uint32_t timeout_ms,
                                            BufferLease& rest) {
  const Clock::time_point deadline = timeout_ms == 0
                                         ? Clock::time_point::max()
                                         : Clock::now() + std::chrono::milliseconds(timeout_ms);
  // Only a header split over several receives is copied (it is at most kMaxProxyHeaderBytes):
  // nearly always it arrives whole, in the first segment, and is parsed where it landed.
  std::string gathered;
  for (;;) {
    BufferLease lease;
    auto n = co_await with_deadline(connection.receive_into(lease), deadline);
    if (!n) co_return Unexpected{n.error()};
    if (*n == 0) co_return Unexpected{std::errc::connection_aborted};
    std::span<const std::byte> bytes = lease.bytes();
    if (!gathered.empty()) {
      gathered.append(lease.chars(), lease.size());
      bytes = std::as_bytes(std::span(gathered.data(), gathered.size()));
    }
    ProxyHeader header;
    switch (parse_proxy_header(bytes, header)) {
      case ProxyParse::kInvalid:
        co_return Unexpected{std::errc::protocol_error};
      case ProxyParse::kIncomplete:
        if (gathered.empty()) gathered.assign(lease.chars(), lease.size());
        continue;  // parse_proxy_header refuses before the bound is passed
      case ProxyParse::kDone:
        break;
    }
    // The header ends inside this receive's bytes (an earlier, shorter prefix was incomplete).
    const size_t after = bytes.size() - header.length;
    lease.consume(lease.size() - after);
    if (!lease.empty()) rest = std::move(lease);
    co_return header;
  }
}

Task<Result<void>> write_proxy_header(TcpConnection& connection, ProxyProtocolVersion version,
                                      InetAddress source, InetAddress destination) {
  std::array<std::byte, kProxyV1MaxBytes> header;
  size_t n = 0;
  if (version == ProxyProtocolVersion::kV1) {
    n = encode_proxy_v1(source, destination,
                        std::span(reinterpret_cast<char*>(header.data()), header.size()));
  } else if (version == ProxyProtocolVersion::kV2) {
    n = encode_proxy_v2(source, destination, header);
  }
  if (n == 0) co_return Result<void>{};
  co_return co_await connection.write_all(std::span(header.data(), n));
}

}  // namespace ucp::proxy
