#include "ucp/proxy/UpstreamConnector.h"

#include <algorithm>
#include <array>
#include <string>

namespace ucp::proxy {
namespace {

class ProxyCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "ucp.proxy"; }
  std::string message(int value) const override {
    switch (static_cast<ProxyErrc>(value)) {
      case ProxyErrc::kNoServer:
        return "no upstream server available";
    }
    return "unknown proxy error";
  }
};

}  // namespace

// Failures of this process, not of the server: out of fds, memory or local ports, or the loop
// short of submission room or stopping. Counting them against the server would eject healthy
// servers whenever the gateway itself is short (fd exhaustion ejected every one), and another
// server would fail the same way.
bool local_failure(std::error_code error) noexcept {
  return error == std::errc::too_many_files_open ||
         error == std::errc::too_many_files_open_in_system || error == std::errc::no_buffer_space ||
         error == std::errc::not_enough_memory || error == std::errc::address_not_available ||
         error == std::errc::resource_unavailable_try_again ||
         error == std::errc::operation_canceled;
}

const std::error_category& proxy_category() noexcept {
  static const ProxyCategory category;
  return category;
}

Task<Result<ClientConnection>> connect_peer(EventLoop& loop, GroupRef group, PeerState& peer,
                                            StopToken stop) {
  // Copied now: a new snapshot may replace the group's options while the connect is away.
  const UpstreamGroupOptions& options = group->options();
  ClientOptions connect_options;
  connect_options.connect_timeout_ms = options.connect_timeout_ms;
  connect_options.output.write_timeout_ms = options.idle_timeout_ms;
  connect_options.stop = stop;
  const Clock::time_point started = Clock::now();
  auto connection = co_await TcpClient::connect(loop, peer.address(), connect_options);
  if (connection) {
    group->report_success(peer, Clock::now() - started);
  } else if (!local_failure(connection.error())) {
    group->report_failure(peer, loop.now());
  }
  co_return connection;
}

Task<Result<UpstreamConnection>> connect_upstream(EventLoop& loop, GroupRef group,
                                                  InetAddress client, StopToken stop) {
  const uint32_t tries = std::clamp<uint32_t>(group->options().connect_tries, 1, kMaxConnectTries);
  std::array<InetAddress, kMaxConnectTries> tried;
  uint32_t attempts = 0;
  std::error_code last = make_error_code(ProxyErrc::kNoServer);
  while (attempts < tries) {
    PeerLease peer = group->pick(client, std::span(tried.data(), attempts), loop.now());
    if (!peer) break;
    tried[attempts++] = peer->address();
    auto connection = co_await connect_peer(loop, group, *peer, stop);
    if (connection) co_return UpstreamConnection{std::move(*connection), std::move(peer), attempts};
    last = connection.error();
    if (local_failure(last)) break;
  }
  co_return Unexpected{last};
}

}  // namespace ucp::proxy
