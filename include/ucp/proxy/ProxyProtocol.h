#pragma once
// The PROXY protocol (HAProxy's, versions 1 and 2): a header a proxy sends before the relayed
// bytes so that the server behind it learns the client's address.
//
// Sending (to upstreams):
//   std::array<char, kProxyV1MaxBytes> line;
//   size_t n = encode_proxy_v1(client, local, line);   // "PROXY TCP4 1.2.3.4 10.0.0.1 5678 80\r\n"
//   std::array<std::byte, kProxyV2MaxEncoded> block;
//   size_t m = encode_proxy_v2(client, local, block);  // 16-byte header + addresses
//
// Accepting (from a load balancer in front), strictly: the header must be the first bytes, v1
// or v2, complete within kMaxProxyHeaderBytes and within the timeout; anything that is not a
// valid header by the letter of the specification refuses the connection as soon as a byte
// shows it (a proxy that guesses whether a header is there lets anyone spoof addresses).
//   auto header = co_await read_proxy_header(connection, 3000, rest);
//   if (!header) co_return;                    // protocol_error, timed_out, EOF...: close
//   client = header->local ? connection.peer() : header->source;
//   // `rest` holds the bytes that came after the header: relay them first.
//
// What is refused: a v1 line longer than 107 bytes or not ending in CRLF, any byte out of place
// (two spaces, leading zeros, an IPv4 octet over 255, a port over 65535, lowercase "tcp4"), a
// v2 version other than 2 or command other than LOCAL/PROXY, an unknown family or protocol
// byte, an address block shorter than its family needs, a v2 header longer than
// kMaxProxyHeaderBytes. Accepted but not used for addresses: v1 UNKNOWN, v2 LOCAL, v2 UNSPEC,
// UDP and UNIX families (the connection's own endpoints stand, as the specification says).
// v2 TLVs are skipped.
//
// Thread contract: the functions are pure; read_proxy_header on the connection's loop thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ucp/base/Result.h"
#include "ucp/coro/Task.h"
#include "ucp/io/BufferLease.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/TcpConnection.h"
#include "ucp/proxy/UpstreamConfig.h"

namespace ucp::proxy {

/// The longest v1 line, CRLF included ("PROXY UNKNOWN" with two full IPv6 addresses).
inline constexpr size_t kProxyV1MaxBytes = 107;
/// The longest v2 header encode_proxy_v2 writes (TCP over IPv6, no TLV).
inline constexpr size_t kProxyV2MaxEncoded = 16 + 36;
/// The longest header accepted: a v2 header with TLVs up to this size in all.
inline constexpr size_t kMaxProxyHeaderBytes = 1024;

/// What a received PROXY header said.
struct ProxyHeader {
  uint8_t version = 0;  // 1 or 2
  /// True when the header carries no client address to use (v1 UNKNOWN, v2 LOCAL, UNSPEC, UDP,
  /// UNIX): the connection's own endpoints stand.
  bool local = true;
  InetAddress source;       // the client (when !local)
  InetAddress destination;  // the address it connected to (when !local)
  size_t length = 0;        // bytes the header took on the wire
};

enum class ProxyParse : uint8_t {
  kIncomplete,  // every byte so far can start a valid header: read more
  kDone,        // `header` is filled
  kInvalid,     // not a valid header: refuse the connection
};

/// Parses the header at the start of `bytes`. On kInvalid, `why` (if given) says what was wrong.
ProxyParse parse_proxy_header(std::span<const std::byte> bytes, ProxyHeader& header,
                              std::string* why = nullptr);

/// The v1 line for a connection from `source` to `destination` (TCP4 or TCP6; with mixed
/// families the IPv4 address is written IPv4-mapped in a TCP6 line; without addresses, "PROXY
/// UNKNOWN\r\n"). `out` needs kProxyV1MaxBytes. Returns the length written.
size_t encode_proxy_v1(const InetAddress& source, const InetAddress& destination,
                       std::span<char> out) noexcept;
/// The v2 header (PROXY command, TCP over IPv4 or IPv6, mixed families as for v1; without
/// addresses, the LOCAL command). `out` needs kProxyV2MaxEncoded. Returns the length written.
size_t encode_proxy_v2(const InetAddress& source, const InetAddress& destination,
                       std::span<std::byte> out) noexcept;
/// The v2 LOCAL header (a connection the proxy makes on its own behalf: a health check).
size_t encode_proxy_v2_local(std::span<std::byte> out) noexcept;

/// Reads a PROXY header (v1 or v2) from the start of `connection`, all of it within
/// `timeout_ms` (0 = none). Errors: protocol_error (not a valid header), timed_out,
/// connection_aborted (EOF before the header ended), or the read's own. Bytes received after
/// the header are left in `rest`.
Task<Result<ProxyHeader>> read_proxy_header(TcpConnection& connection, uint32_t timeout_ms,
                                            BufferLease& rest);

/// Sends the `version` header naming a client at `source` that connected to `destination`
/// (kOff: nothing), before any other byte.
Task<Result<void>> write_proxy_header(TcpConnection& connection, ProxyProtocolVersion version,
                                      InetAddress source, InetAddress destination);

}  // namespace ucp::proxy
