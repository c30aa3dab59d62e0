#pragma once
// TlsSessionCache: a client's resumable sessions, by server name, kept across connections so
// that a reconnect to the same server resumes (an abbreviated handshake: no certificate
// verification, no signature) instead of starting over.
//
//   ucp::tls::TlsSessionCache cache;                        // lives as long as the client
//   auto session = TlsSession::connect(*context, "api.example.com", &cache);
//
// Sessions and tickets the server sends are stored as they arrive (TLS 1.3 tickets come
// after the handshake, with the first records read). A new one for a name replaces the old;
// past `capacity` names, the oldest name is dropped. TLS 1.3 tickets are used once: a
// resumed connection leaves the name without a session until the server's next ticket.
//
// Thread contract: any thread; a mutex guards the entries (one lookup per connect, one store
// per ticket received).

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

struct ssl_session_st;  // OpenSSL's SSL_SESSION

namespace ucp::tls {

class TlsSessionCache {
 public:
  explicit TlsSessionCache(size_t capacity = 64) noexcept : capacity_(capacity) {}
  TlsSessionCache(const TlsSessionCache&) = delete;
  TlsSessionCache& operator=(const TlsSessionCache&) = delete;
  ~TlsSessionCache();

  size_t size() const;
  void clear();

  /// A new reference to the session stored for `name`, or null (the caller frees it). A
  /// spent one (a TLS 1.3 ticket already used) is dropped instead.
  ssl_session_st* find(std::string_view name);
  /// Stores `session` for `name`, taking over the caller's reference.
  void store(std::string_view name, ssl_session_st* session);

 private:
  struct Entry {
    std::string name;
    ssl_session_st* session;
  };
  mutable std::mutex mutex_;
  size_t capacity_;
  std::vector<Entry> entries_;  // oldest first
};

}  // namespace ucp::tls
