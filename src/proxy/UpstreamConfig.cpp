#include "ucp/proxy/UpstreamConfig.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace ucp::proxy {
namespace {

std::string_view trim(std::string_view text) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t'; };
  while (!text.empty() && !not_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && !not_space(text.back())) text.remove_suffix(1);
  return text;
}

Unexpected<Error> invalid(std::string message) {
  return Unexpected{Error(std::move(message), std::make_error_code(std::errc::invalid_argument))};
}

// A decimal number in [min, max], nothing else.
bool parse_number(std::string_view text, uint32_t min, uint32_t max, uint32_t& out) {
  if (text.empty()) return false;
  uint32_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return false;
  if (value < min || value > max) return false;
  out = value;
  return true;
}

bool valid_host_name(std::string_view host) {
  return !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
  });
}

Result<ServerSpec, Error> parse_server(std::string_view entry) {
  ServerSpec server;
  std::string_view address = entry.substr(0, entry.find_first_of(" \t"));
  std::string_view rest = trim(entry.substr(address.size()));
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("'" + std::string(entry) + "': an IPv6 server is written [ADDRESS]:PORT");
    }
    server.host = std::string(address.substr(1, close - 1));
    port = address.substr(close + 2);
    if (server.host.empty() || server.host.find(':') == std::string::npos) {
      return invalid("'" + std::string(entry) + "': brackets hold an IPv6 address");
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) {
      return invalid("'" + std::string(entry) + "': a server is HOST:PORT");
    }
    server.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
    if (server.host.find(':') != std::string::npos) {
      return invalid("'" + std::string(entry) + "': write an IPv6 server as [ADDRESS]:PORT");
    }
    if (!valid_host_name(server.host)) {
      return invalid("'" + std::string(entry) + "': '" + server.host + "' is not a host name");
    }
  }
  uint32_t port_number = 0;
  if (!parse_number(port, 1, 65535, port_number)) {
    return invalid("'" + std::string(entry) + "': the port must be 1..65535");
  }
  server.port = static_cast<uint16_t>(port_number);
  while (!rest.empty()) {
    std::string_view option = rest.substr(0, rest.find_first_of(" \t"));
    rest = trim(rest.substr(option.size()));
    constexpr std::string_view kWeight = "weight=";
    if (option.substr(0, kWeight.size()) != kWeight) {
      return invalid("'" + std::string(entry) + "': unknown server option '" + std::string(option) +
                     "' (only weight=N)");
    }
    if (!parse_number(option.substr(kWeight.size()), 1, kMaxWeight, server.weight)) {
      return invalid("'" + std::string(entry) + "': weight must be 1.." +
                     std::to_string(kMaxWeight));
    }
  }
  return server;
}

}  // namespace

Result<std::vector<ServerSpec>, Error> parse_servers(std::string_view text) {
  std::vector<ServerSpec> servers;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    if (entry.empty()) {
      if (comma == std::string_view::npos && servers.empty()) {
        return invalid("no servers (HOST:PORT [weight=N], ...)");
      }
      return invalid("an empty entry in the server list");
    }
    auto server = parse_server(entry);
    if (!server) return Unexpected{server.error()};
    servers.push_back(std::move(*server));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return servers;
}

Result<Balance, Error> parse_balance(std::string_view text) {
  if (text == "round_robin") return Balance::kRoundRobin;
  if (text == "least_conn") return Balance::kLeastConn;
  if (text == "hash") return Balance::kHash;
  return invalid("'" + std::string(text) + "' is not round_robin, least_conn or hash");
}

Result<void, Error> parse_health_check(std::string_view text, HealthCheckOptions& health) {
  if (text == "none") {
    health.kind = HealthCheckKind::kNone;
    return {};
  }
  if (text == "tcp") {
    health.kind = HealthCheckKind::kTcp;
    return {};
  }
  constexpr std::string_view kHttp = "http:";
  if (text.substr(0, kHttp.size()) == kHttp) {
    const std::string_view path = text.substr(kHttp.size());
    // The path goes into a request line: no spaces or control bytes, and an origin form.
    const bool printable = std::all_of(path.begin(), path.end(), [](char c) {
      return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
    });
    if (path.empty() || path.front() != '/' || !printable) {
      return invalid("'" + std::string(text) + "': http:/PATH with a path that starts with '/'");
    }
    health.kind = HealthCheckKind::kHttp;
    health.path = std::string(path);
    return {};
  }
  return invalid("'" + std::string(text) + "' is not none, tcp or http:/PATH");
}

Result<ProxyProtocolVersion, Error> parse_proxy_protocol(std::string_view text) {
  if (text == "off") return ProxyProtocolVersion::kOff;
  if (text == "v1") return ProxyProtocolVersion::kV1;
  if (text == "v2") return ProxyProtocolVersion::kV2;
  return invalid("'" + std::string(text) + "' is not off, v1 or v2");
}

const char* to_string(Balance balance) noexcept {
  switch (balance) {
    case Balance::kRoundRobin:
      return "round_robin";
    case Balance::kLeastConn:
      return "least_conn";
    case Balance::kHash:
      return "hash";
  }
  return "?";
}

const char* to_string(ProxyProtocolVersion version) noexcept {
  switch (version) {
    case ProxyProtocolVersion::kOff:
      return "off";
    case ProxyProtocolVersion::kV1:
      return "v1";
    case ProxyProtocolVersion::kV2:
      return "v2";
  }
  return "?";
}

std::string to_string(const HealthCheckOptions& health) {
  switch (health.kind) {
    case HealthCheckKind::kNone:
      return "none";
    case HealthCheckKind::kTcp:
      return "tcp";
    case HealthCheckKind::kHttp:
      return "http:" + health.path;
  }
  return "?";
}

Result<void, Error> validate(const UpstreamGroupOptions& group) {
  const std::string where = "upstream '" + group.name + "': ";
  if (group.name.empty()) return invalid("an upstream group has no name");
  if (group.servers.empty()) return invalid(where + "no servers");
  for (const ServerSpec& server : group.servers) {
    if (server.host.empty() || server.port == 0) {
      return invalid(where + "a server needs a host and a port 1..65535");
    }
    if (server.weight < 1 || server.weight > kMaxWeight) {
      return invalid(where + server.host + ": weight must be 1.." + std::to_string(kMaxWeight));
    }
  }
  if (group.servers.size() > 4096) return invalid(where + "more than 4096 servers");
  if (group.max_fails > 0 && group.fail_timeout_ms == 0) {
    return invalid(where + "fail_timeout_ms must be positive when max_fails is");
  }
  if (group.connect_tries == 0) return invalid(where + "connect_tries must be at least 1");
  if (group.health.kind != HealthCheckKind::kNone) {
    if (group.health.interval_ms == 0) return invalid(where + "health_interval_ms must be > 0");
    if (group.health.rise == 0 || group.health.fall == 0) {
      return invalid(where + "health rise and fall must be at least 1");
    }
    if (group.health.kind == HealthCheckKind::kHttp &&
        (group.health.path.empty() || group.health.path.front() != '/')) {
      return invalid(where + "the health check path must start with '/'");
    }
  }
  return {};
}

Result<void, Error> validate(const std::vector<UpstreamGroupOptions>& groups) {
  std::set<std::string_view> names;
  for (const UpstreamGroupOptions& group : groups) {
    if (auto valid = validate(group); !valid) return valid;
    if (!names.insert(group.name).second) {
      return invalid("upstream '" + group.name + "' is defined twice");
    }
  }
  return {};
}

}  // namespace ucp::proxy
