#include "ucp/tls/TlsSessionCache.h"

#include <openssl/ssl.h>

namespace ucp::tls {

TlsSessionCache::~TlsSessionCache() { clear(); }

size_t TlsSessionCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void TlsSessionCache::clear() {
  std::lock_guard lock(mutex_);
  for (auto& entry : entries_) SSL_SESSION_free(entry.session);
  entries_.clear();
}

ssl_session_st* TlsSessionCache::find(std::string_view name) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->name != name) continue;
    // A TLS 1.3 client uses a ticket once (RFC 8446, C.4): OpenSSL marks it spent, and the
    // server's next tickets replace it.
    if (SSL_SESSION_is_resumable(it->session) != 1) {
      SSL_SESSION_free(it->session);
      entries_.erase(it);
      return nullptr;
    }
    SSL_SESSION_up_ref(it->session);
    return it->session;
  }
  return nullptr;
}

void TlsSessionCache::store(std::string_view name, ssl_session_st* session) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->name == name) {
      SSL_SESSION_free(it->session);
      entries_.erase(it);
      break;
    }
  }
  if (capacity_ == 0) {
    SSL_SESSION_free(session);
    return;
  }
  if (entries_.size() >= capacity_) {
    SSL_SESSION_free(entries_.front().session);
    entries_.erase(entries_.begin());
  }
  entries_.push_back({std::string(name), session});
}

}  // namespace ucp::tls
