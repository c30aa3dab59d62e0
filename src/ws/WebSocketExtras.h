#pragma once
// What a WebSocket holds only when it needs it, in one allocation: permessage-deflate state (a
// connection that negotiated it), the peer's close reason (one that sent one), and a client's
// connection, options and reading coroutine. A server connection without deflate has none.

#include <coroutine>
#include <memory>
#include <string>

#include "ucp/net/TcpClient.h"
#include "ucp/ws/Protocol.h"

#include "Deflate.h"

namespace ucp::ws::detail {

struct WebSocketExtras {
  std::unique_ptr<DeflateState> deflate;
  std::string close_reason;
  // A client's.
  Options options;                 // the WebSocket refers to these
  ClientConnection connection;     // the connection it owns
  std::coroutine_handle<> runner;  // its reading side, started by the first receive()
};

}  // namespace ucp::ws::detail
