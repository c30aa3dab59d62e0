#pragma once
// SIGPIPE and the operations that cannot say MSG_NOSIGNAL (private to io/): a splice or
// sendfile(2) into a socket the peer has reset raises SIGPIPE, whose default action kills the
// process. Sends and receives pass MSG_NOSIGNAL; these cannot, so the backends call
// ignore_default_sigpipe() before starting one.
//
// Thread contract: any thread.

namespace ucp::detail {

/// Sets SIGPIPE to SIG_IGN unless the application installed a handler of its own (then it is
/// the application's call). Cheap after the first call.
void ignore_default_sigpipe() noexcept;

}  // namespace ucp::detail
