#pragma once
// What a TLS server and a TLS client are built from (docs/tls.md): certificates, protocol
// versions, ALPN, ciphers, session tickets and client certificates. Plain values; a
// TlsContext is built from them once and never changes afterwards.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ucp::tls {

class TicketKeyRing;

/// TLS 1.0, 1.1 and SSL are never offered: the oldest version UCP speaks is 1.2.
enum class TlsVersion : uint8_t { k1_2, k1_3 };

/// Whether a server asks for client certificates, and whether it requires one.
enum class VerifyClient : uint8_t {
  kNone,      // no certificate asked
  kOptional,  // asked; a client without one is served, one with an invalid one is refused
  kRequire,   // asked; a client without a valid one is refused
};

/// A certificate chain (leaf first) and its private key, both PEM files. ECDSA or RSA.
struct CertificateFiles {
  std::string certificate;
  std::string private_key;
};

/// ECDHE key exchange with AEAD ciphers only, for ECDSA and RSA certificates: forward secrecy,
/// no CBC, no RSA key transport, no SHA-1 MACs (Mozilla's "intermediate" list without DHE).
inline constexpr const char* kDefaultCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
/// TLS 1.3 suites (all AEAD by design).
inline constexpr const char* kDefaultCiphersuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
/// Key-exchange groups, preferred first.
inline constexpr const char* kDefaultGroups = "X25519:P-256";
/// ALPN lists hold at most this many protocols (the counters keep one slot per protocol).
inline constexpr size_t kMaxAlpnProtocols = 8;

/// A TLS server: TlsContext::server(options).
struct TlsOptions {
  /// The first pair is the default; the others are chosen when the client's SNI name matches
  /// one of their certificate's DNS names (subjectAltName, "*.example.com" wildcards).
  std::vector<CertificateFiles> certificates;
  /// Protocols offered to ALPN clients, preferred first; the server picks its most preferred
  /// one the client offers (RFC 7301) and refuses a client that offers none of them. Clients
  /// without ALPN are served. Empty: no ALPN.
  std::vector<std::string> alpn = {"http/1.1"};
  TlsVersion min_version = TlsVersion::k1_2;
  TlsVersion max_version = TlsVersion::k1_3;
  std::string ciphers = kDefaultCiphers;            // TLS 1.2 (OpenSSL cipher list)
  std::string ciphersuites = kDefaultCiphersuites;  // TLS 1.3
  std::string groups = kDefaultGroups;
  /// Resumption by session tickets (stateless: the server keeps no session cache).
  bool session_tickets = true;
  /// A new ticket key every this many seconds; a ticket stays valid for one more interval
  /// after its key is replaced. Used when ticket_keys is empty.
  uint32_t ticket_key_rotation_s = 3600;
  /// The ticket keys, shared by every context that should resume the others' tickets (all
  /// workers of a process share one context, and reloads keep the ring). Empty: the context
  /// makes a ring of its own.
  std::shared_ptr<TicketKeyRing> ticket_keys;
  /// Client certificates: the CAs they must chain to (PEM file) and whether one is asked.
  std::string client_ca;
  VerifyClient verify_client = VerifyClient::kNone;
  /// Not used by the engine: the connection layer fails a handshake that takes longer.
  uint32_t handshake_timeout_ms = 10000;
};

/// A TLS client: TlsContext::client(options). The server name is given per session.
struct TlsClientOptions {
  /// Verify the server's certificate chain and its name. Off only for tests.
  bool verify_peer = true;
  /// CAs to trust (PEM file). Empty: the system store (/etc/ssl/certs).
  std::string ca_file;
  /// A client certificate for servers that ask for one (empty: none).
  CertificateFiles certificate;
  /// Protocols to offer, preferred first (empty: no ALPN).
  std::vector<std::string> alpn;
  TlsVersion min_version = TlsVersion::k1_2;
  TlsVersion max_version = TlsVersion::k1_3;
  std::string ciphers = kDefaultCiphers;
  std::string ciphersuites = kDefaultCiphersuites;
  std::string groups = kDefaultGroups;
  /// Not used by the engine: the connection layer fails a handshake that takes longer.
  uint32_t handshake_timeout_ms = 10000;
};

}  // namespace ucp::tls
