// WebSocket's send(): a frame that fits the output queue is queued in place (SendAwaiter's
// fast path); one that has to wait, be masked through a scratch block or be compressed takes
// a coroutine, send_slow().

#include <algorithm>
#include <cstring>
#include <new>

#include "ucp/ws/WebSocket.h"

#include "FrameReader.h"
#include "WebSocketExtras.h"
#include "WebSocketSend.h"

namespace ucp::ws {

// ---- send ----

WebSocket::SendAwaiter::~SendAwaiter() {
  if (path_ == Path::kSlow) slow_.~Task();
  if (path_ == Path::kBorrowed) borrowed_.~WriteAwaiter();
}

bool WebSocket::SendAwaiter::done(std::error_code error) noexcept {
  path_ = Path::kDone;
  ::new (&error_) std::error_code(error);  // data_'s room: no longer read
  return true;
}

bool WebSocket::SendAwaiter::await_ready() noexcept {
  WebSocket& ws = ws_;
  const std::span<const std::byte> data = data_;
  if (ws.state_ != State::kOpen) {
    return done(ws.state_ == State::kClosed ? ws.terminal_ : make_error_code(Errc::kClosed));
  }
  // The common case on a server: an unmasked, uncompressed frame that fits the queue now.
  const bool may_compress = ws.extras_ && ws.extras_->deflate &&
                            ws.extras_->deflate->deflater.usable() &&
                            data.size() >= ws.extras_->deflate->min_message_bytes;
  if (ws.sending_ || may_compress) return false;  // the slow path
  if (ws.role_ == Role::kClient) {
    // A small frame is masked on the stack and copied into the queue whole; a large one takes
    // the slow path, which masks it through a scratch block.
    if (data.size() > detail::kCopyLimit) return false;
    std::byte frame[detail::kMaxFrameHeaderBytes + detail::kCopyLimit];
    std::byte key[4];
    detail::random_mask(key);
    const size_t n =
        detail::encode_frame_header(frame, static_cast<detail::Opcode>(detail::opcode_of(kind_)),
                                    true, false, data.size(), key);
    if (!data.empty()) std::memcpy(frame + n, data.data(), data.size());
    uint32_t phase = 0;
    detail::apply_mask(std::span<std::byte>(frame + n, data.size()), key, phase);
    auto whole = ws.tcp_.write(std::span<const std::byte>(frame, n + data.size()));
    if (!whole.await_ready()) return false;  // the queue is full: wait in line
    return done(whole.await_resume().error());
  }
  std::byte header[detail::kMaxFrameHeaderBytes];
  const size_t n =
      detail::encode_frame_header(header, static_cast<detail::Opcode>(detail::opcode_of(kind_)),
                                  true, false, data.size(), nullptr);
  {
    auto head = ws.tcp_.write(std::span<const std::byte>(header, n));
    if (!head.await_ready()) return false;  // the queue is full: wait in line
    if (auto queued = head.await_resume(); !queued) return done(queued.error());
  }
  if (data.size() <= detail::kCopyLimit) {
    auto body = ws.tcp_.write(data);
    if (!body.await_ready()) {
      // The header is queued: the payload must follow it before any other frame.
      ws.sending_ = true;
      header_out_ = true;
      return false;
    }
    return done(body.await_resume().error());
  }
  // Large: sent from the caller's memory, behind the header (queued in this same step, so no
  // other frame can come between them).
  ::new (&borrowed_) TcpConnection::WriteAwaiter(ws.tcp_.write_all(data));
  path_ = Path::kBorrowed;
  return borrowed_.await_ready();
}

bool WebSocket::SendAwaiter::await_suspend(std::coroutine_handle<> caller) noexcept {
  if (path_ == Path::kBorrowed) {
    borrowed_.await_suspend(caller);
    return true;
  }
  const std::span<const std::byte> data = data_;
  try {
    ::new (&slow_) Task<Result<void>>(ws_.send_slow(kind_, data, header_out_));
  } catch (const std::bad_alloc&) {
    if (header_out_) FrameLock::unlock(ws_);
    return !done(make_error_code(std::errc::not_enough_memory));
  }
  path_ = Path::kSlow;
  return slow_.await_suspend(caller);  // false: it completed at once
}

Result<void> WebSocket::SendAwaiter::await_resume() noexcept {
  switch (path_) {
    case Path::kBorrowed:
      return borrowed_.await_resume();
    case Path::kSlow:
      return slow_.await_resume();
    case Path::kDone:
      if (error_) return Unexpected{error_};
      break;
    case Path::kPending:
      break;
  }
  return {};
}

Task<Result<void>> WebSocket::send_slow(MessageKind kind, std::span<const std::byte> data,
                                        bool header_out) {
  Sender counted(*this);
  if (!header_out) co_await FrameLock(*this);
  FrameLock::Turn turn{*this};
  if (header_out) co_return co_await tcp_.write(data);  // the rest of a frame under way
  if (state_ != State::kOpen) {
    co_return Unexpected{state_ == State::kClosed ? terminal_ : make_error_code(Errc::kClosed)};
  }
  detail::MessageBuffer packed;  // compressed, and masked in place for a client
  std::span<const std::byte> payload = data;
  bool rsv1 = false;
  detail::DeflateState* deflate = extras_ ? extras_->deflate.get() : nullptr;
  if (deflate != nullptr && deflate->deflater.usable() &&
      data.size() >= deflate->min_message_bytes && deflate->deflater.compress(data, packed)) {
    payload = packed.bytes();
    rsv1 = true;
  }
  const bool masked = role_ == Role::kClient;
  std::byte key[4];
  if (masked) detail::random_mask(key);
  std::byte header[detail::kMaxFrameHeaderBytes];
  const size_t n =
      detail::encode_frame_header(header, static_cast<detail::Opcode>(detail::opcode_of(kind)),
                                  true, rsv1, payload.size(), masked ? key : nullptr);
  if (auto queued = co_await tcp_.write(detail::bytes(header, n)); !queued) co_return queued;
  if (masked) {
    uint32_t phase = 0;
    if (rsv1) {
      detail::apply_mask(packed.bytes(), key, phase);
    } else {
      // Masked copies through a scratch block; each is queued before the next is made.
      constexpr size_t kPiece = 4096;
      if (!packed.reserve_more(std::min(payload.size(), kPiece))) {
        co_return Unexpected{std::errc::not_enough_memory};
      }
      for (size_t at = 0; at < payload.size();) {
        const size_t take = std::min(payload.size() - at, packed.capacity());
        std::memcpy(packed.spare().data(), payload.data() + at, take);
        const auto piece = packed.spare().first(take);
        detail::apply_mask(piece, key, phase);
        if (auto queued = co_await tcp_.write(piece); !queued) co_return queued;
        at += take;
      }
      co_return Result<void>{};
    }
  }
  if (payload.size() <= detail::kCopyLimit) co_return co_await tcp_.write(payload);
  co_return co_await tcp_.write_all(payload);
}

}  // namespace ucp::ws
