#pragma once
// SHA-1, for the one place WebSocket needs it: Sec-WebSocket-Accept (RFC 6455 §4.2.2) is the
// base64 of SHA-1(key + GUID). Not for anything that needs collision resistance.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ucp::ws::detail {

using Sha1Digest = std::array<uint8_t, 20>;

/// The SHA-1 digest of `data` (FIPS 180-4).
Sha1Digest sha1(std::string_view data) noexcept;

}  // namespace ucp::ws::detail
