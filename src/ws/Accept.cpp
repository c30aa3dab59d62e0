#include "ucp/ws/Accept.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Base64.h"
#include "Deflate.h"
#include "Handshake.h"

namespace ucp::ws {

namespace detail {

/// The way into WebSocket's private server entry.
struct Accepted {
  /// `start` is the closure's own: it lives until run() first suspends (upgrade() asks for
  /// UpgradeKeep::kUntilStarted), and run() reads it only before that.
  static Task<> serve(ServerStart& start, TcpConnection& tcp, BufferLease& received) {
    start.tcp = &tcp;
    start.received = &received;
    return WebSocket::serve(start);
  }
};

}  // namespace detail

static_assert(sizeof(detail::ServerStart) <= http::UpgradeHandler::kInlineSize,
              "the closure of upgrade() must fit UniqueFunction's inline room");

namespace {

using http::iequals;
using http::Request;
using http::Response;

bool any_header_has_token(const Request& request, std::string_view name, std::string_view token) {
  for (const http::Header& h : request.headers()) {
    if (iequals(h.name, name) && detail::has_token(h.value, token)) return true;
  }
  return false;
}

/// The one value of a header that must appear once; false when it is missing or repeated.
bool single_header(const Request& request, std::string_view name, std::string_view& value) {
  int count = 0;
  for (const http::Header& h : request.headers()) {
    if (iequals(h.name, name)) {
      value = h.value;
      ++count;
    }
  }
  return count == 1;
}

void refuse(Response& response, int status, std::string_view why) {
  response.set_status(status);
  response.set_content_type("text/plain");
  response.body_buffer().assign(why).append("\n");
}

/// Checks the handshake; answers a refusal itself (false), or adds the 101's headers and fills
/// `negotiated` (true).
bool answer_handshake(const Request& request, Response& response, const Options& options,
                      detail::Negotiated& negotiated) {
  if (!any_header_has_token(request, "upgrade", "websocket")) {
    response.add_header("Upgrade", "websocket");
    refuse(response, 426, "this resource is a WebSocket: send Upgrade: websocket");
    return false;
  }
  if (request.method() != http::Method::kGet || request.version_minor() < 1) {
    refuse(response, 400, "a WebSocket handshake is an HTTP/1.1 GET");
    return false;
  }
  if (!any_header_has_token(request, "connection", "upgrade")) {
    refuse(response, 400, "a WebSocket handshake needs Connection: Upgrade");
    return false;
  }
  std::string_view version;
  if (!single_header(request, "sec-websocket-version", version)) {
    refuse(response, 400, "a WebSocket handshake needs one Sec-WebSocket-Version");
    return false;
  }
  if (version != "13") {
    response.add_header("Sec-WebSocket-Version", "13");
    refuse(response, 426, "only WebSocket version 13 is spoken here");
    return false;
  }
  std::string_view key;
  if (!single_header(request, "sec-websocket-key", key) || !detail::valid_websocket_key(key)) {
    refuse(response, 400, "a WebSocket handshake needs one Sec-WebSocket-Key of 16 bytes");
    return false;
  }
  // Subprotocol: ours in our order of preference, the first the client offers too.
  for (size_t i = 0; i < options.subprotocols.size() && i < detail::kNoSubprotocol; ++i) {
    if (any_header_has_token(request, "sec-websocket-protocol", options.subprotocols[i])) {
      negotiated.subprotocol = static_cast<uint8_t>(i);
      break;
    }
  }
  std::string extension_answer;
  if (options.deflate.enabled) {
    std::vector<detail::Extension> offers;
    bool well_formed = true;
    for (const http::Header& h : request.headers()) {
      if (iequals(h.name, "sec-websocket-extensions")) {
        well_formed = well_formed && detail::parse_extensions(h.value, offers);
      }
    }
    // A malformed list is treated as no offer: the connection goes on uncompressed.
    if (well_formed && detail::accept_deflate_offer(offers, options.deflate,
                                                    negotiated.deflate_params, extension_answer)) {
      negotiated.deflate = true;
    }
  }
  response.add_header("Upgrade", "websocket");
  response.add_header("Sec-WebSocket-Accept", detail::accept_key(key));
  if (negotiated.subprotocol != detail::kNoSubprotocol) {
    response.add_header("Sec-WebSocket-Protocol", options.subprotocols[negotiated.subprotocol]);
  }
  if (negotiated.deflate) response.add_header("Sec-WebSocket-Extensions", extension_answer);
  return true;
}

struct Endpoint {
  Options options;
  WebSocket::Handler handler;
};

}  // namespace

bool accept(const Request& request, Response& response, const Options& options,
            WebSocket::Handler handler) {
  detail::Negotiated negotiated;
  if (!answer_handshake(request, response, options, negotiated)) return false;
  response.switch_protocols(
      [handler = std::move(handler),
       start = detail::ServerStart{nullptr, nullptr, &options, nullptr, negotiated}](
          TcpConnection& tcp, BufferLease& received) mutable {
        start.handler = &handler;
        return detail::Accepted::serve(start, tcp, received);
      });
  return true;
}

http::Handler upgrade(Options options, WebSocket::Handler handler) {
  auto endpoint = std::make_unique<Endpoint>(Endpoint{std::move(options), std::move(handler)});
  return [endpoint = std::move(endpoint)](Request& request, Response& response) -> Task<> {
    detail::Negotiated negotiated;
    if (answer_handshake(request, response, endpoint->options, negotiated)) {
      // The route keeps the options and the handler: the connection only points to them, so
      // what it carries fits in the closure's inline room, and is needed only until the
      // WebSocket is built and the handler started (the bytes received are moved into it).
      response.switch_protocols(
          [start = detail::ServerStart{nullptr, nullptr, &endpoint->options, &endpoint->handler,
                                       negotiated}](TcpConnection& tcp,
                                                    BufferLease& received) mutable {
            return detail::Accepted::serve(start, tcp, received);
          },
          http::UpgradeKeep::kUntilStarted);
    }
    co_return;
  };
}

bool is_upgrade_request(const Request& request) noexcept {
  return any_header_has_token(request, "upgrade", "websocket");
}

}  // namespace ucp::ws
