// WebSocket: the connection. The reading side is one coroutine, run(), that parks between
// receive() calls and reads, parses, answers control frames and closes for whoever receives;
// a server's run() also runs the handler, so a connection is one frame for the WebSocket and
// its reading plus the handler's own (an idle one holds no buffer: the loop lends one per
// read). Sending needs no coroutine of its own: a frame that fits the output queue is queued
// in place, and only a frame that has to wait, be masked or be compressed takes one.
//
// Control passes by symmetric transfer: receive() hands over to run(), run() hands the result
// back, so a message costs no loop iteration beyond the read that brought it.
//
// This file holds construction and the end; receive (with the timers), send and the control
// frames have a file each (WebSocketSend.h lists them).

#include "ucp/ws/WebSocket.h"

#include <new>
#include <utility>

#include "ucp/io/WithTimeout.h"

#include "FrameReader.h"
#include "Handshake.h"
#include "WebSocketExtras.h"

namespace ucp::ws {

// ---- construction ----

WebSocket::WebSocket(TcpConnection& tcp, const Options& options, Role role, BufferLease received,
                     const detail::Negotiated& negotiated,
                     std::unique_ptr<detail::WebSocketExtras> extras) noexcept
    : tcp_(tcp),
      options_(options),
      input_(std::move(received)),
      extras_(std::move(extras)),
      subprotocol_(negotiated.subprotocol),
      role_(role) {
  static_assert(sizeof(detail::FrameReader) <= kReaderBytes, "grow WebSocket::kReaderBytes");
  static_assert(alignof(detail::FrameReader) <= 8);
  auto* r = ::new (reader_storage_) detail::FrameReader(
      role == Role::kServer, {options.max_message_bytes, options.max_frame_bytes});
  if (negotiated.deflate) {
    if (!extras_) extras_.reset(new (std::nothrow) detail::WebSocketExtras);
    if (extras_) {
      extras_->deflate.reset(new (std::nothrow) detail::DeflateState(
          negotiated.deflate_params, options.deflate, role == Role::kServer));
      if (extras_->deflate) r->enable_inflate(&extras_->deflate->inflater);
    }
  }
  set_callback(&on_timer);
  if (options.ping_interval_ms > 0) arm_timer(options.ping_interval_ms);
}

WebSocket::~WebSocket() {
  tcp_.loop().cancel_timer(*this);
  if (extras_ && extras_->runner) extras_->runner.destroy();  // a client's reading side
  reader().~FrameReader();
}

std::string_view WebSocket::close_reason() const noexcept {
  return extras_ ? std::string_view(extras_->close_reason) : std::string_view();
}

std::string_view WebSocket::subprotocol() const noexcept {
  if (subprotocol_ >= options_.subprotocols.size()) return {};
  return options_.subprotocols[subprotocol_];
}

bool WebSocket::compressed() const noexcept { return extras_ && extras_->deflate; }

// ---- the end ----

void WebSocket::end(uint16_t code, std::error_code why) noexcept {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (close_code_ == 0 || code != close_code::kAbnormal) close_code_ = code;
  terminal_ = why;
  tcp_.loop().cancel_timer(*this);
  input_.reset();
  input_offset_ = 0;
}

void WebSocket::shut_down() noexcept {
  tcp_.shutdown_write();  // FIN once our last frames are out
  lingering_ = true;
}

Task<> WebSocket::linger() {
  // Read what the peer still sends until its FIN, so that closing does not reset our close
  // frame away (RFC 6455 §7.1.1: the server closes the TCP connection first, the client
  // follows); bounded, since a peer may never stop.
  lingering_ = false;
  const Clock::time_point due =
      tcp_.loop().now() + std::chrono::milliseconds(options_.close_timeout_ms);
  for (;;) {
    auto data = co_await with_deadline(tcp_.receive(), due);
    if (!data || data->empty()) break;
  }
}

}  // namespace ucp::ws
