// WebSocket's control frames: ping(), close(), and the ping, pong and close frames the reading
// side sends. Each is built whole, then written in its turn (FrameLock).

#include <algorithm>
#include <cstring>

#include "ucp/ws/WebSocket.h"

#include "FrameReader.h"
#include "Utf8Validator.h"
#include "WebSocketSend.h"

namespace ucp::ws {

Task<Result<void>> WebSocket::send_control(uint8_t opcode, std::span<const std::byte> payload) {
  // Built whole before the first suspension: `payload` may be the reader's, valid until then.
  std::byte frame[detail::kMaxFrameHeaderBytes + detail::kMaxControlPayload];
  const size_t length = std::min(payload.size(), detail::kMaxControlPayload);
  const bool masked = role_ == Role::kClient;
  std::byte key[4];
  if (masked) detail::random_mask(key);
  const size_t n = detail::encode_frame_header(frame, static_cast<detail::Opcode>(opcode), true,
                                               false, length, masked ? key : nullptr);
  if (length > 0) std::memcpy(frame + n, payload.data(), length);
  if (masked) {
    uint32_t phase = 0;
    detail::apply_mask(std::span<std::byte>(frame + n, length), key, phase);
  }
  Sender counted(*this);
  co_await FrameLock(*this);
  FrameLock::Turn turn{*this};
  co_return co_await tcp_.write(detail::bytes(frame, n + length));
}

Task<Result<void>> WebSocket::send_close(uint16_t code, std::string_view reason) {
  state_ = State::kClosing;
  std::byte payload[detail::kMaxControlPayload];
  size_t n = 0;
  if (code != close_code::kNoStatus) {
    payload[0] = static_cast<std::byte>(code >> 8);
    payload[1] = static_cast<std::byte>(code & 0xFF);
    const size_t room = std::min(reason.size(), detail::kMaxControlPayload - 2);
    if (room > 0) std::memcpy(payload + 2, reason.data(), room);
    n = 2 + room;
  }
  co_return co_await send_control(0x8, detail::bytes(payload, n));
}

Task<Result<void>> WebSocket::ping(std::span<const std::byte> payload) {
  if (payload.size() > detail::kMaxControlPayload)
    co_return Unexpected{std::errc::invalid_argument};
  if (state_ != State::kOpen) {
    co_return Unexpected{state_ == State::kClosed ? terminal_ : make_error_code(Errc::kClosed)};
  }
  co_return co_await send_control(0x9, payload);
}

Task<Result<void>> WebSocket::close(uint16_t code, std::string_view reason) {
  if (!detail::valid_close_code(code) || reason.size() > detail::kMaxControlPayload - 2 ||
      !detail::Utf8Validator::valid(std::as_bytes(std::span(reason.data(), reason.size())))) {
    co_return Unexpected{std::errc::invalid_argument};
  }
  if (state_ == State::kOpen) {
    std::byte payload[detail::kMaxControlPayload] = {static_cast<std::byte>(code >> 8),
                                                     static_cast<std::byte>(code & 0xFF)};
    if (!reason.empty()) std::memcpy(payload + 2, reason.data(), reason.size());
    state_ = State::kClosing;
    close_code_ = code;
    arm_timer(options_.close_timeout_ms);
    if (auto sent = co_await send_control(0x8, detail::bytes(payload, 2 + reason.size())); !sent) {
      end(close_code::kAbnormal, sent.error());
      co_return sent;
    }
  }
  if (receiver_) co_return Result<void>{};  // that receive() sees the handshake through
  // Read (and drop) until the peer's close frame has come and the connection has ended.
  for (;;) {
    auto message = co_await receive();
    if (!message) break;
  }
  co_return Result<void>{};
}

}  // namespace ucp::ws
