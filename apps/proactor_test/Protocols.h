#pragma once
// The two business protocols of bin/proactor_test (docs/design.md, section 6).

#include <cstddef>

#include "ucp/coro/Task.h"
#include "ucp/net/TcpConnection.h"

namespace ucp::app {

/// Echoes every byte back, in order, until the peer closes, errs or idles out.
Task<> echo(TcpConnection& connection);

/// The seed's "pingpong" for wrk: every complete HTTP/1.x request gets 200 OK with a short
/// body; keep-alive, Connection: close, HTTP/1.0, pipelining, Content-Length bodies.
/// Malformed or oversized requests get 400/413/431/501 and a close.
Task<> http_pingpong(TcpConnection& connection, size_t max_request_bytes);

}  // namespace ucp::app
