#include "BinaryKeys.h"

#include <string>
#include <string_view>

#include "ucp/app/Config.h"
#include "ucp/app/ServerSections.h"
#include "ucp/base/Defaults.h"
#include "ucp/net/InetAddress.h"
#include "ucp/net/Multicast.h"

namespace ucp::app {
namespace {

// http.index: a file name, never a path.
std::string check_index(std::string_view value) {
  if (value.find('/') != std::string_view::npos || value == "." || value == "..") {
    return "\"" + std::string(value) + "\" is not a file name (no '/')";
  }
  return {};
}

std::string check_multicast_group(std::string_view value) {
  if (value.empty()) return {};
  const auto group = InetAddress::parse(std::string(value), 0);
  if (!group || !is_multicast(*group)) {
    return "\"" + std::string(value) +
           "\" is not a multicast address (IPv4 224.0.0.0/4, IPv6 ff00::/8)";
  }
  return {};
}

std::string check_interface(std::string_view value) {
  if (value.empty() || interface_index(value)) return {};
  return "\"" + std::string(value) + "\" is neither an address of this host nor an interface name";
}

// A socket hears a group only when bound to the wildcard address of the group's family, or
// to the group itself.
void check_multicast_address(const Config& config, ConfigProblems& problems) {
  const auto group = InetAddress::parse(config.get<std::string>("server.udp_multicast_group"), 0);
  const auto ip = InetAddress::parse(config.get<std::string>("server.ip"), 0);
  if (!group || !ip) return;
  const std::string wildcard = group->family() == AF_INET6 ? "::" : "0.0.0.0";
  if (ip->ip() == group->ip() || ip->ip() == wildcard) {
    return;
  }
  problems.fail({"server.ip", "server.udp_multicast_group"},
                "server.ip must be " + wildcard + " (or the group itself) for udp_echo to hear " +
                    "the multicast group " + config.get<std::string>("server.udp_multicast_group"));
}

void check_connection_memory(const Config& config, ConfigProblems& problems) {
  const MachineLimits& machine = problems.machine();
  if (machine.memory_bytes == 0) return;
  const uint64_t per_connection = config.get<uint64_t>("server.max_output_bytes") +
                                  2 * config.get<uint64_t>("server.max_request_bytes");
  if (per_connection <= machine.memory_bytes / 2) return;
  problems.fail({"server.max_output_bytes", "server.max_request_bytes"},
                "one connection may hold max_output_bytes + 2 x max_request_bytes = " +
                    human_bytes(per_connection) + " (" + std::to_string(per_connection) +
                    " bytes), more than half of this machine's memory, " +
                    human_bytes(machine.memory_bytes) + " (" +
                    std::to_string(machine.memory_bytes) +
                    " bytes); lower server.max_output_bytes or server.max_request_bytes");
}

}  // namespace

void declare_binary_keys(ConfigSchema& schema) {
  auto& server = schema.section("server");
  server
      .choice("protocol", "echo", {"echo", "http", "udp_echo", "websocket"},
              "bin/proactor_test: echo | http (200 OK per request, for wrk) | udp_echo | "
              "websocket (an echo on every GET path)")
      .noun("a protocol");
  server.size("max_request_bytes", 65536, 1024, 16777216,
              "bin/proactor_test, protocol = http: the largest header block (431) and body (413)");
  server.size("udp_recv_buffer_bytes", 4194304, 0, 1073741824,
              "bin/proactor_test, protocol = udp_echo: SO_RCVBUF of each socket; 0 = the "
              "kernel's default");
  server
      .text("udp_multicast_group", "",
            "bin/proactor_test, protocol = udp_echo: join this IPv4/IPv6 multicast group and "
            "echo its datagrams to their senders; empty = none")
      .check(check_multicast_group);
  server
      .text("udp_multicast_interface", "",
            "with udp_multicast_group: the local address (or interface name) to join on; "
            "127.0.0.1 works over loopback; empty = the kernel's choice")
      .check(check_interface);
  server.integer("udp_metrics_port", 0, 0, 65535,
                 "bin/proactor_test, protocol = udp_echo: 0 = off; else count every socket's "
                 "traffic and answer GET /metrics (ucp_udp_*) over HTTP on ip:udp_metrics_port");
  auto& http = schema.section("http");
  http.text("root", "www", "bin/http_server: static files, relative to the working directory")
      .non_empty();
  http.text("index", "index.html", "bin/http_server: served for a directory URL")
      .non_empty()
      .check(check_index);
  schema.check(check_connection_memory);
  // The original configuration's idle timeout (config/ucp.conf); bin/test_client idle counts
  // on it. A library program's default is longer (docs/config.md).
  const std::string read_timeout =
      "server.read_timeout_ms=" + std::to_string(defaults::kBinariesReadTimeoutMs);
  schema.set_defaults({read_timeout});
  schema.check(check_multicast_address);
}

}  // namespace ucp::app
