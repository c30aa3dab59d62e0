#include "ucp/ws/Protocol.h"

namespace ucp::ws {
namespace {

class WsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "websocket"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::kClosed:
        return "WebSocket closed";
      case Errc::kProtocolError:
        return "WebSocket protocol error (closed with 1002)";
      case Errc::kInvalidPayload:
        return "invalid WebSocket payload (closed with 1007)";
      case Errc::kMessageTooBig:
        return "WebSocket message too big (closed with 1009)";
      case Errc::kPingTimeout:
        return "no answer to a WebSocket keep-alive ping";
      case Errc::kHandshakeFailed:
        return "WebSocket handshake failed";
      case Errc::kBadUrl:
        return "not a ws:// URL";
      case Errc::kBusy:
        return "another coroutine is receiving on this WebSocket";
    }
    return "unknown WebSocket error";
  }
};

}  // namespace

const std::error_category& ws_category() noexcept {
  static const WsCategory category;
  return category;
}

}  // namespace ucp::ws
