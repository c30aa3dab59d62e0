#pragma once
// What a WebSocket user names: the errors it reports, the close status codes, messages, and the
// options of a connection (limits, keep-alive, subprotocols, permessage-deflate). No I/O here;
// WebSocket.h is the connection.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace ucp::ws {

/// Why a WebSocket ended (receive(), send() and close() report these; transport errors such
/// as connection_reset or timed_out come through as they are).
enum class Errc : int {
  kClosed = 1,       // the connection is closed: close_code() says how (peer's code, 1005, 1006)
  kProtocolError,    // the peer broke RFC 6455: failed with 1002
  kInvalidPayload,   // text that is not UTF-8, bad compressed data: failed with 1007
  kMessageTooBig,    // a message or frame past the limits: failed with 1009
  kPingTimeout,      // no answer to a keep-alive ping within ping_timeout_ms: dropped
  kHandshakeFailed,  // client: the server refused the upgrade or answered it wrongly
  kBadUrl,           // client: not a ws:// URL (wss:// needs TLS, which UCP does not have)
  kBusy,             // receive() while another coroutine is receiving
};
const std::error_category& ws_category() noexcept;
inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), ws_category()};
}

}  // namespace ucp::ws

template <>
struct std::is_error_code_enum<ucp::ws::Errc> : std::true_type {};

namespace ucp::ws {

/// Close status codes (RFC 6455 §7.4.1 and the IANA registry). Applications may use
/// 3000-4999.
namespace close_code {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;
inline constexpr uint16_t kNoStatus = 1005;  // received a close frame without a code
inline constexpr uint16_t kAbnormal = 1006;  // the connection ended without a close frame
inline constexpr uint16_t kInvalidPayload = 1007;
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kMessageTooBig = 1009;
inline constexpr uint16_t kMandatoryExtension = 1010;
inline constexpr uint16_t kInternalError = 1011;
inline constexpr uint16_t kTryAgainLater =
    1013;  // overloaded: e.g. a subscriber too slow to keep up
}  // namespace close_code

enum class MessageKind : uint8_t { kText = 1, kBinary = 2 };

/// One whole message. `data` is valid until the next receive() on its WebSocket.
struct Message {
  MessageKind kind = MessageKind::kBinary;
  std::span<const std::byte> data;

  bool is_text() const noexcept { return kind == MessageKind::kText; }
  std::string_view text() const noexcept {
    return {reinterpret_cast<const char*>(data.data()), data.size()};
  }
};

/// permessage-deflate (RFC 7692), off unless enabled. "Own" is the direction this endpoint
/// compresses, "peer" the one it inflates. Compression state is allocated only on a connection
/// that negotiated the extension, and only when it is first used; without context takeover
/// (the default, both ways) the zlib streams come from a small per-thread cache for one
/// message at a time and an idle connection keeps none (docs/websocket.md has the figures).
class Metrics;

struct DeflateOptions {
  bool enabled = false;
  int level = 6;             // zlib level 1..9
  uint8_t window_bits = 15;  // own LZ77 window 9..15 (server_max_window_bits as a server)
  uint8_t mem_level = 8;     // zlib memLevel 1..9: the compressor's state, 2^(mem_level+9) B
  /// Compress every message alone. With context takeover a connection keeps its compressor
  /// between messages: 2^(window_bits+2) + 2^(mem_level+9) bytes (262 KB at 15 and 8).
  bool no_context_takeover = true;
  /// Ask the peer to do the same (a server tells it: client_no_context_takeover). With
  /// context takeover a connection keeps its decompressor: 7 KB + 2^peer_window_bits.
  bool peer_no_context_takeover = true;
  uint8_t peer_window_bits = 15;    // ask the peer for at most this window (9..15)
  size_t min_message_bytes = 1024;  // smaller messages are sent uncompressed
  /// Server: what the connections of one worker thread may keep between messages for
  /// context takeover, in all (each counted at the sizes above). A connection that would pass
  /// it is answered with no context takeover both ways, which a client must accept.
  size_t max_context_bytes = 64 * 1024 * 1024;
  /// A connection may inflate at most this many times the compressed bytes it received, past
  /// a burst of max_message_bytes (refilled at this ratio, up to that burst): past it, 1009.
  /// Bounds the work one received byte can cause. 0: no bound but max_message_bytes.
  uint32_t max_inflate_ratio = 32;
};

struct Options {
  uint64_t max_message_bytes = 1024 * 1024;  // a whole message (inflated): 1009 past it
  uint64_t max_frame_bytes = 1024 * 1024;    // one frame's payload on the wire: 1009 past it
  uint32_t ping_interval_ms = 0;             // keep-alive: ping after this long without data
  uint32_t ping_timeout_ms = 30000;          // ...and drop the connection if nothing comes back
  uint32_t close_timeout_ms = 5000;          // wait for the peer's close frame, then its FIN
  uint32_t handshake_timeout_ms = 10000;     // client: connect + upgrade
  /// Server: the subprotocols it speaks, in order of preference (the first the client also
  /// offers is chosen). Client: the subprotocols it offers.
  std::vector<std::string> subprotocols;
  DeflateOptions deflate;
  /// Where connections and messages are counted (ucp/ws/Metrics.h), if anywhere; it must
  /// outlive the connections.
  Metrics* metrics = nullptr;
};

}  // namespace ucp::ws
