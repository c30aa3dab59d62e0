#pragma once
// TlsCounters: what a worker counts about its handshakes, as plain numbers (no atomics: each
// worker keeps its own; TcpServer writes and reads a worker's figures with relaxed atomic_ref
// loads and stores, and operator+= adds workers up).
//
//   if (auto step = session.handshake(data); step && step->established) counters.record(session);
//   else if (!step) counters.record_failure(step.error());
//
// An HttpServer with TLS renders them on /metrics, per worker, as
// ucp_tls_handshakes_total{result="ok"|"failed"}, ucp_tls_resumed_total and
// ucp_tls_handshake_failures_total{reason=...} (docs/metrics.md); the versions and ALPN
// counts are read through TcpServer::tls_counters() only.

#include <array>
#include <cstdint>
#include <system_error>

#include "ucp/tls/TlsError.h"
#include "ucp/tls/TlsOptions.h"

namespace ucp::tls {

class TlsSession;

struct TlsCounters {
  uint64_t handshakes_ok = 0;
  std::array<uint64_t, kErrcCount> handshakes_failed{};  // by Errc (index 0: other errors)
  uint64_t resumed = 0;                                  // of handshakes_ok
  uint64_t tls1_2 = 0;
  uint64_t tls1_3 = 0;
  std::array<uint64_t, kMaxAlpnProtocols> alpn{};  // by index in the context's ALPN list
  uint64_t no_alpn = 0;

  /// A handshake that finished: ok, resumed, version, ALPN.
  void record(const TlsSession& established) noexcept;
  /// A handshake that failed, by the error's reason (a timeout: Errc::kHandshakeTimeout).
  void record_failure(std::error_code error) noexcept;
  uint64_t handshakes_failed_total() const noexcept;
  TlsCounters& operator+=(const TlsCounters& other) noexcept;
};

}  // namespace ucp::tls
