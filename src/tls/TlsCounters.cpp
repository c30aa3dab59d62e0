#include "ucp/tls/TlsCounters.h"

#include "ucp/tls/TlsSession.h"

namespace ucp::tls {

void TlsCounters::record(const TlsSession& established) noexcept {
  ++handshakes_ok;
  if (established.resumed()) ++resumed;
  if (established.protocol() == TlsVersion::k1_3) {
    ++tls1_3;
  } else {
    ++tls1_2;
  }
  const int index = established.alpn_index();
  if (index >= 0 && static_cast<size_t>(index) < alpn.size()) {
    ++alpn[static_cast<size_t>(index)];
  } else {
    ++no_alpn;
  }
}

void TlsCounters::record_failure(std::error_code error) noexcept {
  const auto reason = static_cast<size_t>(reason_of(error));
  ++handshakes_failed[reason < handshakes_failed.size() ? reason : 0];
}

uint64_t TlsCounters::handshakes_failed_total() const noexcept {
  uint64_t total = 0;
  for (uint64_t n : handshakes_failed) total += n;
  return total;
}

TlsCounters& TlsCounters::operator+=(const TlsCounters& other) noexcept {
  handshakes_ok += other.handshakes_ok;
  for (size_t i = 0; i < handshakes_failed.size(); ++i) {
    handshakes_failed[i] += other.handshakes_failed[i];
  }
  resumed += other.resumed;
  tls1_2 += other.tls1_2;
  tls1_3 += other.tls1_3;
  for (size_t i = 0; i < alpn.size(); ++i) alpn[i] += other.alpn[i];
  no_alpn += other.no_alpn;
  return *this;
}

}  // namespace ucp::tls
