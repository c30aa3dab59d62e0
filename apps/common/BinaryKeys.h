#pragma once
// The config keys of UCP's own server binaries, which the library does not have: which
// protocol bin/proactor_test serves, its pingpong's request limit and UDP receive buffer, and
// where bin/http_server's static files are. The binaries share one config file
// (config/ucp.conf, README's quick start), so each declares all of them: one file serves
// both, every key is still checked in either, and a typo is refused by both. What every
// server has is the library's (ucp/app/ServerSections.h).
//
//   [server] protocol = echo | http | udp_echo | websocket     bin/proactor_test
//   [server] max_request_bytes, udp_recv_buffer_bytes          bin/proactor_test
//   [server] udp_multicast_group, udp_multicast_interface       bin/proactor_test
//   [http]   root, index                                       bin/http_server
//
// Plus the check that one connection's worst case (server.max_output_bytes + 2 x
// server.max_request_bytes) fits in half of the machine's memory.

#include "ucp/app/ConfigSchema.h"

namespace ucp::app {

void declare_binary_keys(ConfigSchema& schema);

}  // namespace ucp::app
