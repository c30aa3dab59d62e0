#pragma once
// The opening handshake's pieces that both sides use (RFC 6455 §4): the accept key, the token
// lists of Connection, Upgrade and Sec-WebSocket-Protocol, and what a server agreed to.

#include <cstdint>
#include <string>
#include <string_view>

#include "ucp/ws/WebSocket.h"

#include "Deflate.h"

namespace ucp::ws::detail {

inline constexpr uint8_t kNoSubprotocol = 0xFF;

/// What the handshake settled for one connection (small: it rides in the closure that runs the
/// connection).
struct Negotiated {
  uint8_t subprotocol = kNoSubprotocol;  // index into Options::subprotocols
  bool deflate = false;
  DeflateParams deflate_params;
};

/// What a server connection starts from: kept in the closure that runs the connection (which
/// lives as long as the connection), so that the connection's coroutine needs only a pointer
/// to it. The options and the handler belong to the route (or to the closure of accept()).
struct ServerStart {
  TcpConnection* tcp = nullptr;
  BufferLease* received = nullptr;  // the bytes after the handshake: moved in
  const Options* options = nullptr;
  WebSocket::Handler* handler = nullptr;
  Negotiated negotiated;
};

/// Sec-WebSocket-Accept for `key`: base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")).
std::string accept_key(std::string_view key);

/// Whether the comma-separated token list `list` (a Connection or Upgrade header) holds
/// `token`, in any case.
bool has_token(std::string_view list, std::string_view token) noexcept;

/// Calls `each(token)` for every element of a comma-separated list, trimmed; stops early when
/// it returns false.
template <class Each>
void for_each_token(std::string_view list, Each each) {
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(at, comma - at);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty() && !each(item)) return;
    at = comma + 1;
  }
}

}  // namespace ucp::ws::detail
