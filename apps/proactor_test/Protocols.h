#pragma once
// The business protocols of bin/proactor_test: echo, the "pingpong" HTTP service that wrk
// drives (every request gets 200 "Hello, World!"), and a WebSocket echo for benchmarks.

#include "ucp/app/ServerSections.h"
#include "ucp/coro/Task.h"
#include "ucp/http/HttpServer.h"
#include "ucp/net/TcpConnection.h"

namespace ucp::app {

/// Echoes every byte back, in order, until the peer closes, errs or idles out.
Task<> echo(TcpConnection& connection);

/// The HTTP layer's limits and timeouts for the pingpong: the [http] section, with the
/// proactor_test keys that bounded the pingpong before it ran on the layer applied on top:
/// server.max_request_bytes is the largest header block and the largest body (and caps the
/// request line), and server.read_timeout_ms (when not 0) caps the header, keep-alive and
/// body timeouts.
http::HttpOptions pingpong_options(const ServerSettings& settings, uint32_t max_request_bytes);

/// Answers every request, whatever its method and path, with 200 "Hello, World!"; the
/// layer does the rest (keep-alive, pipelining, bodies, refusals, timeouts).
void add_pingpong_routes(http::Router& router);

/// WebSocket echo: every GET path accepts the upgrade, and each message comes back as it was
/// sent (same kind, same bytes) until the peer closes. A request that is not an upgrade gets
/// 426.
void add_websocket_echo_routes(http::Router& router);

}  // namespace ucp::app
