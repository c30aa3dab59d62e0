#pragma once
// Whether the kernel can take over TLS records (kTLS: the "tls" upper-layer protocol on TCP
// sockets). UCP has no kTLS data path yet (docs/tls.md says what one would change); servers
// log the probe's answer at start-up so that operators know what a kernel would offer.

#include <system_error>

namespace ucp::tls {

struct KernelTlsProbe {
  bool available = false;
  /// Why not: ENOENT (no tls module: CONFIG_TLS off or not loaded), or the socket call that
  /// failed on the way.
  std::error_code error;
};

/// Connects a TCP socket pair on 127.0.0.1 and tries setsockopt(TCP_ULP, "tls") on one end.
/// Blocking, about a millisecond; any thread.
KernelTlsProbe probe_kernel_tls() noexcept;

}  // namespace ucp::tls
