#pragma once
// permessage-deflate (RFC 7692): the negotiation of its parameters in the handshake, and the
// zlib streams that compress and inflate messages.
//
// Memory: a stream's zlib state is allocated when the connection first compresses (or
// inflates) a message, never at the handshake. With context takeover a connection keeps its
// stream for life (the LZ77 window carries over between messages: inflating costs about
// 7 KiB + 2^window_bits, compressing 2^(window_bits+2) + 2^(mem_level+9)). Without it (the
// default), the stream is taken from a per-thread cache for one message and given back reset,
// so idle connections hold no zlib state at all. What connections keep for context takeover
// is counted per thread and bounded by DeflateOptions::max_context_bytes at negotiation.
//
// Thread contract: the connection's loop thread; the caches are per thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ucp/ws/Protocol.h"

#include "MessageBuffer.h"

namespace ucp::ws::detail {

/// What both ends agreed on (RFC 7692 §7.1), from the server's point of view.
struct DeflateParams {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  uint8_t server_max_window_bits = 15;  // 8..15
  uint8_t client_max_window_bits = 15;  // 8..15
};

/// One extension of a Sec-WebSocket-Extensions list, with its parameters (views into the
/// header; a quoted value without its quotes).
struct ExtensionParam {
  std::string_view name;
  std::string_view value;
  bool has_value = false;
};
struct Extension {
  std::string_view name;
  std::vector<ExtensionParam> params;
};

/// Parses `header` (RFC 6455 §9.1: 1#(token *(";" token ["=" (token | quoted-string)]))) and
/// appends the extensions to `out`. False when it is malformed.
bool parse_extensions(std::string_view header, std::vector<Extension>& out);

/// Server: the first permessage-deflate offer in `offers` it can accept (offers with unknown,
/// repeated or invalid parameters are declined, RFC 7692 §5), with what to answer in
/// `response`. False when none can be accepted (the connection then goes on uncompressed).
/// Context takeover is agreed only while the calling thread's connections keep less than
/// options.max_context_bytes for it; past that, the answer says no context takeover both ways.
bool accept_deflate_offer(std::span<const Extension> offers, const DeflateOptions& options,
                          DeflateParams& agreed, std::string& response);

/// Client: the offer to send.
std::string deflate_offer(const DeflateOptions& options);
/// Client: checks the server's answer to that offer (§7.1: only known parameters, once each,
/// valid values, client_max_window_bits at most what was offered, server_no_context_takeover
/// back if it was asked for). False: the handshake fails.
bool accept_deflate_response(const Extension& response, const DeflateOptions& options,
                             DeflateParams& agreed);

/// Inflates one direction's compressed messages, piece by piece as they arrive.
class Inflater {
 public:
  enum class Status : uint8_t { kOk, kTooBig, kInflatesTooFar, kBadData, kNoMemory };

  /// The peer compresses with at most `window_bits`; `reset_each_message`: it takes no context
  /// over between messages. `max_ratio`: see DeflateOptions::max_inflate_ratio.
  Inflater(uint8_t window_bits, bool reset_each_message, uint32_t max_ratio = 0) noexcept;
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  ~Inflater();

  /// Inflates `in` behind what `out` holds; kTooBig once `out` would pass `limit` bytes,
  /// kInflatesTooFar once the connection's inflated bytes pass max_ratio times its compressed
  /// ones (beyond a burst of `limit`).
  Status inflate(std::span<const std::byte> in, MessageBuffer& out, uint64_t limit) noexcept;
  /// The end of a message: inflates the 00 00 FF FF the sender removed (§7.2.2).
  Status finish(MessageBuffer& out, uint64_t limit) noexcept;

  struct Stream;  // a zlib stream (opaque; owned, or lent by the thread's cache)

 private:
  Status run(std::span<const std::byte> in, MessageBuffer& out, uint64_t limit) noexcept;
  /// run() within the ratio's credit, which `in` adds to.
  Status run_bounded(std::span<const std::byte> in, MessageBuffer& out, uint64_t limit) noexcept;
  /// After a message (or a failure): a per-message stream goes back to the thread's cache.
  void end_message(bool failed) noexcept;

  Stream* stream_ = nullptr;
  uint64_t credit_ = 0;  // bytes it may still inflate (max_ratio per compressed byte received)
  uint32_t max_ratio_;
  bool credit_started_ = false;
  uint8_t window_bits_;
  bool reset_each_message_;
};

/// Compresses one direction's messages.
class Deflater {
 public:
  Deflater(uint8_t window_bits, bool reset_each_message, int level, int mem_level) noexcept;
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  ~Deflater();

  /// Whether messages are compressed at all: a window below 9 bits (which zlib cannot make)
  /// means every message is sent uncompressed, which permessage-deflate allows.
  bool usable() const noexcept { return window_bits_ >= 9; }
  /// Compresses the whole message `in` into `out` (emptied first), without the trailing
  /// 00 00 FF FF. False when memory is exhausted.
  bool compress(std::span<const std::byte> in, MessageBuffer& out) noexcept;

  struct Stream;  // a zlib stream (opaque; owned, or lent by the thread's cache)

 private:
  Stream* stream_ = nullptr;
  int level_;
  int mem_level_;
  uint8_t window_bits_;
  bool reset_each_message_;
};

/// A connection's permessage-deflate state (allocated only when it was negotiated). What it
/// keeps between messages for context takeover counts against the thread's total
/// (kept_context_bytes()) while it lives.
struct DeflateState {
  DeflateState(const DeflateParams& params, const DeflateOptions& options, bool server) noexcept;
  DeflateState(const DeflateState&) = delete;
  DeflateState& operator=(const DeflateState&) = delete;
  ~DeflateState();
  DeflateParams params;
  Inflater inflater;  // what the peer sends
  Deflater deflater;  // what we send
  size_t min_message_bytes;
  size_t context_bytes;  // kept between messages (0 without context takeover)
};

/// Bytes a connection with `params` keeps between messages for context takeover (zlib's
/// figures: 7 KiB + 2^window_bits inflating, 2^(window_bits+2) + 2^(mem_level+9) + 6 KiB
/// compressing).
size_t context_bytes(const DeflateParams& params, int mem_level, bool server) noexcept;
/// What the live DeflateStates of the calling thread keep for context takeover.
size_t kept_context_bytes() noexcept;

}  // namespace ucp::ws::detail
