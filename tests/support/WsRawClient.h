#pragma once
// WsRawClient: a WebSocket client made of blocking-style socket calls and hand-built frames, for
// tests that must send what a well-behaved client never would (unmasked frames, reserved bits,
// bad UTF-8, half a frame...) and see exactly what the server answers.
//
//   auto ws = ucp::test::WsRawClient::open(port, "/echo");
//   ASSERT_TRUE(ws) << ws.error().message();
//   ws->send(ucp::test::ws_frame(0x81, "hello"));          // FIN + text, masked
//   auto frame = ws->read_frame();                          // the echo, unmasked
//   EXPECT_EQ(frame->payload, "hello");
//
// Every wait is bounded (LoopbackClient.h). Header-only; no UCP library needed.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "HttpClient.h"
#include "LoopbackClient.h"

namespace ucp::test {

/// One frame as a client sends it: `first` is the first byte (FIN, RSV, opcode); masked with a
/// fixed key unless `masked` is false. `length_bytes` forces a length form: 0 = shortest, 2, 8.
inline std::string ws_frame(uint8_t first, std::string_view payload, bool masked = true,
                            int length_bytes = 0) {
  std::string out;
  out += static_cast<char>(first);
  const uint8_t mask_bit = masked ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (length_bytes == 0) length_bytes = n < 126 ? 0 : (n <= 0xFFFF ? 2 : 8);
  if (length_bytes == 0) {
    out += static_cast<char>(mask_bit | n);
  } else if (length_bytes == 2) {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(n & 0xFF);
  } else {
    out += static_cast<char>(mask_bit | 127);
    for (int i = 7; i >= 0; --i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  }
  const uint8_t key[4] = {0xA1, 0x5C, 0x07, 0xE3};
  if (masked) out.append(reinterpret_cast<const char*>(key), 4);
  for (size_t i = 0; i < payload.size(); ++i) {
    out += static_cast<char>(masked ? payload[i] ^ static_cast<char>(key[i % 4]) : payload[i]);
  }
  return out;
}

/// A close frame's payload: the code, then the reason.
inline std::string ws_close_payload(uint16_t code, std::string_view reason = {}) {
  std::string out;
  out += static_cast<char>(code >> 8);
  out += static_cast<char>(code & 0xFF);
  out.append(reason);
  return out;
}

struct WsFrame {
  uint8_t opcode = 0;
  bool fin = false;
  bool rsv1 = false;
  bool masked = false;
  std::string payload;
  /// A close frame's code (0 if it has none).
  uint16_t close_code() const {
    if (payload.size() < 2) return 0;
    return static_cast<uint16_t>(static_cast<uint8_t>(payload[0]) << 8 |
                                 static_cast<uint8_t>(payload[1]));
  }
};

class WsRawClient {
 public:
  /// Connects to 127.0.0.1:port and sends an opening handshake for `path` with `extra_headers`
  /// (each ending in CRLF). The answer's head is in response(); it must be a 101 unless
  /// `expect_101` is false. `receive_buffer` > 0: SO_RCVBUF before the handshake (a reader
  /// that is slow to take what it is sent).
  static Result<WsRawClient> open(uint16_t port, std::string_view path = "/",
                                  std::string_view extra_headers = "", bool expect_101 = true,
                                  std::string_view key = "dGhlIHNhbXBsZSBub25jZQ==",
                                  int receive_buffer = 0) {
    auto fd = connect_loopback(port, 5000, receive_buffer);
    if (!fd) return Unexpected{fd.error()};
    WsRawClient client(std::move(*fd));
    std::string request = "GET " + std::string(path) +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: " +
                          std::string(key) + "\r\nSec-WebSocket-Version: 13\r\n" +
                          std::string(extra_headers) + "\r\n";
    if (auto sent = send_text(client.fd(), request); !sent) return Unexpected{sent.error()};
    auto reply = read_response(client.fd(), client.pending_, 10000, expect_101);
    if (!reply) return Unexpected{reply.error()};
    client.reply_ = std::move(*reply);
    if (expect_101 && client.reply_.status != 101) {
      return Unexpected{std::errc::protocol_error};
    }
    return client;
  }

  int fd() const { return fd_.get(); }
  /// Closes our end (a FIN): the server's wait for it ends.
  void close() { fd_ = UniqueFd(); }
  const HttpReply& response() const { return reply_; }

  Result<void> send(std::string_view bytes, int64_t timeout_ms = 10000) {
    return send_text(fd(), bytes, timeout_ms);
  }

  /// The next frame from the server.
  Result<WsFrame> read_frame(int64_t timeout_ms = 10000) {
    const Deadline deadline(timeout_ms);
    if (auto ok = fill(2, deadline); !ok) return Unexpected{ok.error()};
    WsFrame frame;
    const auto b0 = static_cast<uint8_t>(pending_[0]);
    const auto b1 = static_cast<uint8_t>(pending_[1]);
    frame.fin = (b0 & 0x80) != 0;
    frame.rsv1 = (b0 & 0x40) != 0;
    frame.opcode = b0 & 0x0F;
    frame.masked = (b1 & 0x80) != 0;
    uint64_t length = b1 & 0x7F;
    size_t header = 2;
    if (length == 126) {
      if (auto ok = fill(4, deadline); !ok) return Unexpected{ok.error()};
      length = uint64_t{static_cast<uint8_t>(pending_[2])} << 8 | static_cast<uint8_t>(pending_[3]);
      header = 4;
    } else if (length == 127) {
      if (auto ok = fill(10, deadline); !ok) return Unexpected{ok.error()};
      length = 0;
      for (int i = 0; i < 8; ++i) length = length << 8 | static_cast<uint8_t>(pending_[2 + i]);
      header = 10;
    }
    if (frame.masked) header += 4;
    if (auto ok = fill(header + length, deadline); !ok) return Unexpected{ok.error()};
    frame.payload = pending_.substr(header, length);
    if (frame.masked) {
      for (size_t i = 0; i < frame.payload.size(); ++i) {
        frame.payload[i] = static_cast<char>(frame.payload[i] ^ pending_[header - 4 + i % 4]);
      }
    }
    pending_.erase(0, header + length);
    return frame;
  }

  /// Reads frames until a close frame comes and returns it (other frames are dropped).
  Result<WsFrame> read_close(int64_t timeout_ms = 10000) {
    const Deadline deadline(timeout_ms);
    for (;;) {
      auto frame = read_frame(deadline.remaining_ms());
      if (!frame) return frame;
      if (frame->opcode == 0x8) return frame;
    }
  }

  /// The server closed the TCP connection (EOF or reset) within the timeout, nothing else
  /// arriving first.
  bool closed_by_server(int64_t timeout_ms = 5000) {
    if (!pending_.empty()) return false;
    auto drained = drain_until_closed(fd(), timeout_ms);
    return drained && *drained == 0;
  }

  /// The whole answer to a close handshake the test started: a close frame, then the end.
  Result<WsFrame> close_handshake(uint16_t code, std::string_view reason = {}) {
    if (auto sent = send(ws_frame(0x88, ws_close_payload(code, reason))); !sent) {
      return Unexpected{sent.error()};
    }
    return read_close();
  }

 private:
  explicit WsRawClient(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<void> fill(size_t want, const Deadline& deadline) {
    char buffer[65536];
    while (pending_.size() < want) {
      auto n = recv_some(fd(), buffer, deadline.remaining_ms());
      if (!n) return Unexpected{n.error()};
      if (*n == 0) return Unexpected{std::errc::connection_aborted};
      pending_.append(buffer, *n);
    }
    return {};
  }

  UniqueFd fd_;
  std::string pending_;
  HttpReply reply_;
};

}  // namespace ucp::test
