#pragma once
// Socket activation: listening sockets that a service manager (systemd, or anything speaking
// its LISTEN_FDS protocol) opened for this process and passed as fds 3, 4, ... The server
// adopts one instead of binding its own (ServerOptions::listen_fds), so the port can be
// privileged, is open before the server starts, and stays open across restarts.
//
//   auto inherited = ucp::take_inherited_listen_fds();
//   if (!inherited) { /* LISTEN_FDS malformed: print inherited.error().message(), exit */ }
//   if (inherited->size() == 1) options.listen_fds = {inherited->front().release()};
//
// The protocol, as sd_listen_fds(3) reads it, implemented here so that UCP needs no
// libsystemd: LISTEN_PID names the process the sockets are for (a child that inherited the
// environment must not take them), LISTEN_FDS counts them, starting at fd 3.

#include <vector>

#include "ucp/base/Result.h"
#include "ucp/base/UniqueFd.h"

namespace ucp {

/// The first fd a service manager passes (SD_LISTEN_FDS_START).
inline constexpr int kFirstInheritedFd = 3;

/// Takes the sockets passed to this process: none when LISTEN_PID is unset or names another
/// process, else LISTEN_FDS of them from fd 3 on, each marked close-on-exec. Unsets
/// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES in every case, so that nothing this process
/// starts takes them too. Errors: invalid_argument when LISTEN_PID or LISTEN_FDS is not a
/// positive number, bad_file_descriptor when a passed fd is not open.
/// Call it from main() before starting threads: it changes the environment.
Result<std::vector<UniqueFd>> take_inherited_listen_fds();

/// Succeeds when `fd` is a TCP/IPv4 or TCP/IPv6 socket in the listening state; else
/// not_a_socket, address_family_not_supported, wrong_protocol_type or invalid_argument
/// (not listening).
Result<void> check_listening_tcp_socket(int fd);

}  // namespace ucp
