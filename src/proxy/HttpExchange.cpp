// One request's way through the HTTP mode: a server of its group (a pooled keep-alive
// connection, or a new one with retries on another server), the rewritten head and the body
// to it, the answer back to the client piece by piece, and the connection back to the pool.

#include <algorithm>
#include <array>

#include "ucp/log/Logger.h"
#include "ucp/proxy/HttpProxy.h"
#include "ucp/proxy/ProxyProtocol.h"
#include "ucp/proxy/Relay.h"
#include "ucp/proxy/UpstreamConnector.h"

#include "HttpForwarding.h"
#include "HttpProxyState.h"

namespace ucp::proxy {
namespace {

using http::BodyFraming;
using http::ClientSession;
using http::ResponseHead;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
/// Pooled connections found closed by their server, one after the other, before a request
/// gives up on the pool: each costs one round trip at most.
constexpr uint32_t kMaxStaleRetries = 4;
/// A body of at most this many bytes, received with its head, is sent in one write with it.
constexpr uint64_t kInlineBody = 4096;

/// A failure that a pooled connection the server closed just before the request explains.
bool stale_connection(std::error_code error) noexcept {
  return error == http::ClientErrc::kClosed || error == std::errc::connection_reset ||
         error == std::errc::broken_pipe;
}

/// A request in flight for its group while it lives.
class Active {
 public:
  explicit Active(uint64_t& count) noexcept : count_(count) { ++count_; }
  Active(const Active&) = delete;
  Active& operator=(const Active&) = delete;
  ~Active() { --count_; }

 private:
  uint64_t& count_;
};

/// Not a coroutine: the caller awaits the connection's own awaiter (no frame per write).
TcpConnection::WriteAwaiter write_text(TcpConnection& connection, std::string_view text) noexcept {
  return connection.write_all(std::span(text.data(), text.size()));
}

/// One chunk of a chunked body: the size line and the CRLF are queued (copied), the bytes go
/// from the caller's memory (a receive buffer of the upstream's connection).
Task<Result<void>> write_chunk(TcpConnection& client, std::string_view bytes) {
  char line[20];
  size_t n = 0;
  for (uint64_t size = bytes.size(); size != 0 || n == 0; size >>= 4) {
    line[n++] = "0123456789abcdef"[size & 0xF];
  }
  std::reverse(line, line + n);
  line[n++] = '\r';
  line[n++] = '\n';
  if (auto queued = co_await client.write(std::span(line, n)); !queued) co_return queued;
  if (auto sent = co_await client.write_all(std::span(bytes.data(), bytes.size())); !sent) {
    co_return sent;
  }
  co_return co_await client.write(std::span("\r\n", 2));
}

/// The last chunk and the trailers the upstream sent.
Task<Result<void>> write_last_chunk(TcpConnection& client, std::span<const http::Header> trailers) {
  std::string last = "0\r\n";
  for (const http::Header& field : trailers) {
    last.append(field.name).append(": ").append(field.value).append("\r\n");
  }
  last.append("\r\n");
  co_return co_await write_text(client, last);
}

}  // namespace

Task<bool> HttpProxy::forward(Worker& worker, Exchange& x) {
  EventLoop& loop = x.client.loop();
  http::Request& request = x.reader.request();
  const int minor = request.version_minor();
  Group& state = *x.state;
  detail::GroupCounters& counts = state.counters;
  ++counts.requests;
  const Active active(counts.active);
  // What this request needs of the group's options, taken now: a new snapshot may replace them
  // while it waits.
  const UpstreamGroupOptions& now = x.group->options();
  const uint32_t timeout_ms = now.idle_timeout_ms;
  const uint32_t tries = std::clamp<uint32_t>(now.connect_tries, 1, kMaxConnectTries);
  const ProxyProtocolVersion proxy_protocol = now.proxy_protocol;
  const RelayOptions relay_options{now.idle_timeout_ms, now.total_timeout_ms};
  state.pool.set_options({now.keepalive, now.keepalive, now.idle_timeout_ms});

  const bool websocket = detail::is_websocket_upgrade(request);
  const BodyFraming framing = x.reader.body_framing();
  const uint64_t length = x.reader.content_length();
  const bool head_request = request.method() == http::Method::kHead;
  std::string& head = x.scratch.upstream_head;
  head.clear();
  detail::append_upstream_head(head, {request, x.ip, "http", framing, length, websocket});

  // ---- a server, and the request to it ----
  std::array<InetAddress, kMaxConnectTries> tried;
  uint32_t attempts = 0;
  uint32_t stale_retries = 0;
  std::error_code last = make_error_code(ProxyErrc::kNoServer);
  std::unique_ptr<ClientSession> session;
  PeerLease peer;
  std::string key;  // the pool's: the server's name (and the client's, with a PROXY header)
  const ResponseHead* response = nullptr;
  bool body_started = false;  // bytes of the body have left the client: no second try
  for (;;) {
    if (attempts >= tries) break;
    peer = x.group->pick(x.address, std::span(tried.data(), attempts), loop.now());
    if (!peer) break;
    key.assign(peer->name());
    // A PROXY header names one client connection: such a connection serves that one only.
    if (proxy_protocol != ProxyProtocolVersion::kOff) key.append("|").append(x.address.to_string());
    if (auto idle = state.pool.try_take(key)) {  // (no coroutine frame when nothing is awaited)
      session = std::move(*idle);
    } else {
      session = co_await state.pool.take(key);
    }
    const bool reused = session != nullptr;
    if (reused) {
      ++counts.connections_reused;
    } else {
      tried[attempts++] = peer->address();
      auto connection = co_await connect_peer(loop, x.group, *peer);
      if (!connection) {
        ++counts.connect_errors;
        last = connection.error();
        if (local_failure(last)) break;
        continue;
      }
      ++counts.connections_made;
      session = std::make_unique<ClientSession>(std::move(*connection));
      if (proxy_protocol != ProxyProtocolVersion::kOff) {
        const InetAddress destination =
            InetAddress::local_of(x.client.fd()).value_or(InetAddress{});
        if (auto sent = co_await write_proxy_header(session->connection(), proxy_protocol,
                                                    x.address, destination);
            !sent) {
          last = sent.error();
          co_await session->close();
          session.reset();
          continue;
        }
      }
    }

    std::error_code failure;
    if (auto sent = co_await session->send_head(head, framing, length, head_request); !sent) {
      failure = sent.error();
    }
    if (!failure && framing != BodyFraming::kNone) {
      body_started = true;
      if (x.reader.expects_continue()) {  // the client waits for it: a server is there now
        if (!co_await write_text(x.client, kContinue)) {
          co_await session->close();
          co_return false;
        }
        x.reader.continue_sent();
      }
      for (;;) {
        auto piece = co_await x.reader.read_body();
        if (!piece) {
          // The client's side failed: a refused body (400, 413) or one too slow (408) is
          // answered; a client gone is not. The server's connection is mid-request: closed.
          co_await session->close();
          const int status = x.reader.error_status();
          if (status != 0 && co_await detail::send_status(x.client, status, false, minor)) {
            co_await detail::linger(x.client, x.settings.options.linger_timeout_ms);
          }
          co_return false;
        }
        if (piece->empty()) break;
        if (auto sent = co_await session->send_body(*piece); !sent) {
          failure = sent.error();
          break;
        }
      }
      if (!failure) {
        if (auto ended = co_await session->end_body(x.reader.trailers()); !ended) {
          failure = ended.error();
        }
      }
    }
    // Also after a failed send: a server may answer before it has read the whole body (a 413,
    // say) and stop reading, and its answer is the one to pass on.
    auto answered = co_await session->read_head(timeout_ms);
    if (answered) {
      response = *answered;
      break;
    }
    if (!failure) failure = answered.error();
    last = failure;
    co_await session->close();
    session.reset();
    if (reused && !body_started && stale_connection(failure) &&
        stale_retries++ < kMaxStaleRetries) {
      continue;  // a pooled connection its server had closed: the request goes again
    }
    break;
  }

  if (response == nullptr) {
    int status = 502;
    if (last == ProxyErrc::kNoServer) {
      status = 503;
      ++counts.no_server;
    } else if (last == std::errc::timed_out) {
      status = 504;
      ++counts.gateway_timeouts;
    } else {
      ++counts.bad_gateway;
    }
    if (worker.warn_allowed(loop.now())) {
      LOG_WARN("upstream {}: {} {}: {} ({})", x.group->name(), request.method_name(),
               request.target(), status, last.message());
    }
    if (session) co_await session->close();
    const bool keep = request.keep_alive() && x.reader.body_complete() && !worker.draining;
    if (!co_await detail::send_status(x.client, status, keep, minor)) co_return false;
    if (!keep) co_await detail::linger(x.client, x.settings.options.linger_timeout_ms);
    co_return keep;
  }

  // ---- the answer, back to the client ----
  const ResponseHead& answer = *response;
  ++counts.responses[std::clamp(answer.status / 100 - 1, 0, 4)];
  if (answer.status == 101) {
    if (!websocket) {  // a switch nobody asked for
      ++counts.bad_gateway;
      co_await session->close();
      if (co_await detail::send_status(x.client, 502, false, minor)) {
        co_await detail::linger(x.client, x.settings.options.linger_timeout_ms);
      }
      co_return false;
    }
    std::string& out = x.scratch.client_head;
    out.clear();
    detail::append_client_head(out, {answer, detail::ClientFraming::kNone, true, minor, true});
    BufferLease from_upstream = session->take_received();
    BufferLease from_client = x.reader.take_unread();
    if (co_await write_text(x.client, out) &&
        (from_upstream.empty() || co_await x.client.write_all(from_upstream.bytes()))) {
      from_upstream.reset();
      Worker::bump(worker.upgrades);
      const RelayResult relayed = co_await relay(x.client, session->connection(), relay_options,
                                                 nullptr, std::move(from_client));
      LOG_DEBUG("upgraded {} <-> {} ended: {}", x.ip, peer ? peer->name() : key,
                to_string(relayed.end));
    }
    co_await session->close();
    co_return false;
  }

  const detail::ClientFraming client_framing = detail::client_framing(answer, minor);
  const bool keep = request.keep_alive() && x.reader.body_complete() &&
                    client_framing != detail::ClientFraming::kUntilClose && !worker.draining;
  std::string& out = x.scratch.client_head;
  out.clear();
  detail::append_client_head(out, {answer, client_framing, keep, minor, false});
  // A small body that came with the head is appended to it and leaves in the same write: one
  // send either way (the head would wait in the output queue for the body's write_all), but
  // neither the head's copy into the queue nor a second buffer there.
  bool head_waits = client_framing == detail::ClientFraming::kLength &&
                    answer.content_length <= kInlineBody &&
                    session->buffered() >= answer.content_length;
  if (!head_waits) {
    const bool sent = client_framing == detail::ClientFraming::kNone
                          ? static_cast<bool>(co_await write_text(x.client, out))
                          : static_cast<bool>(co_await x.client.write(std::span(out)));
    if (!sent) {
      co_await session->close();
      co_return false;
    }
  }
  for (;;) {
    // A piece already received is taken without a coroutine frame (the common case: a small
    // body that came with its head, then its end).
    auto ready = session->try_read_body();
    Result<std::string_view> piece =
        ready ? std::move(*ready) : co_await session->read_body(timeout_ms);
    if (head_waits && piece) {  // (at most kInlineBody bytes: the body's length bounds it)
      head_waits = false;
      out.append(*piece);
      if (!co_await write_text(x.client, out)) {
        co_await session->close();
        co_return false;
      }
      continue;
    }
    if (!piece) {
      // Cut short after its head went out: no status can say so any more. A reset tells the
      // client the response is incomplete (a clean close could pass for its end).
      ++counts.bad_gateway;
      if (worker.warn_allowed(loop.now())) {
        LOG_WARN("upstream {}: the answer to {} {} was cut short: {}", x.group->name(),
                 request.method_name(), request.target(), piece.error().message());
      }
      co_await session->close();
      reset_connection(x.client);
      co_return false;
    }
    if (piece->empty()) break;
    const bool sent = client_framing == detail::ClientFraming::kChunked
                          ? static_cast<bool>(co_await write_chunk(x.client, *piece))
                          : static_cast<bool>(co_await x.client.write_all(
                                std::span(piece->data(), piece->size())));
    if (!sent) {  // the client left: the server's answer is unfinished, its connection too
      co_await session->close();
      co_return false;
    }
  }
  if (client_framing == detail::ClientFraming::kChunked &&
      !co_await write_last_chunk(x.client, session->trailers())) {
    co_await session->close();
    co_return false;
  }
  if (session->reusable()) {
    state.pool.give(key, std::move(session));
  } else {
    co_await session->close();
  }
  if (!keep && !x.reader.body_complete()) {
    co_await detail::linger(x.client, x.settings.options.linger_timeout_ms);
  }
  co_return keep;
}

}  // namespace ucp::proxy
