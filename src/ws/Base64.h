#pragma once
// Base64 (RFC 4648 §4, with padding) for the WebSocket handshake keys.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ucp::ws::detail {

/// The base64 text of `bytes`.
std::string base64_encode(std::span<const uint8_t> bytes);

/// A Sec-WebSocket-Key as RFC 6455 §4.1 makes it: the base64 of 16 bytes, i.e. 22 characters of
/// the alphabet and "==".
bool valid_websocket_key(std::string_view key) noexcept;

}  // namespace ucp::ws::detail
