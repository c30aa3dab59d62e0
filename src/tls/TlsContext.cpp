#include "ucp/tls/TlsContext.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "ucp/log/Logger.h"
#include "ucp/tls/TicketKeyRing.h"

#include "ContextState.h"

namespace ucp::tls {
namespace {

using Failure = Unexpected<Error>;
void free_names(STACK_OF(X509_NAME) * names) { sk_X509_NAME_pop_free(names, X509_NAME_free); }
using X509NamesPtr = std::unique_ptr<STACK_OF(X509_NAME), detail::OpenSslFree<free_names>>;
using X509StorePtr = std::unique_ptr<X509_STORE, detail::OpenSslFree<X509_STORE_free>>;

// ---- ex_data: the ContextState hangs off the SSL_CTX -------------------------------------

void free_owned_state(void*, void* state, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<detail::ContextState*>(state);
}
int owner_index() {
  static const int index =
      SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &free_owned_state);
  return index;
}
int view_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// ---- reading files -------------------------------------------------------------------------

// OpenSSL's own message for the error it just queued ("bad base64 decode"), and a clean queue.
std::string openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

Result<std::string, Error> read_file(std::string_view what, const std::string& path) {
  if (path.empty()) return Failure{Error(std::string(what) + ": no file given")};
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const std::error_code why(errno, std::system_category());
    return Failure{Error(std::string(what) + " " + path + ": " + why.message(), why)};
  }
  std::string content;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) content.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  const int read_errno = errno;
  std::fclose(file);
  if (failed) {
    const std::error_code why(read_errno, std::system_category());
    return Failure{Error(std::string(what) + " " + path + ": " + why.message(), why)};
  }
  return content;
}

int no_password(char*, int, int, void*) {
  return 0;
}  // an encrypted key is refused, never prompted

bool no_more_pem(unsigned long code) {
  return ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE;
}

// Every certificate of a PEM file, in order (other PEM blocks, such as a key, are skipped).
Result<std::vector<detail::X509Ptr>, Error> read_certificates(std::string_view what,
                                                              const std::string& path) {
  auto pem = read_file(what, path);
  if (!pem) return Failure{pem.error()};
  detail::BioPtr bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  std::vector<detail::X509Ptr> certificates;
  for (;;) {
    ERR_clear_error();
    detail::X509Ptr certificate(PEM_read_bio_X509(bio.get(), nullptr, &no_password, nullptr));
    if (certificate) {
      certificates.push_back(std::move(certificate));
      continue;
    }
    const unsigned long code = ERR_peek_last_error();
    if (no_more_pem(code) && !certificates.empty()) break;
    if (no_more_pem(code)) {
      ERR_clear_error();
      return Failure{Error(std::string(what) + " " + path + ": no PEM certificate in it")};
    }
    return Failure{
        Error(std::string(what) + " " + path + ": bad PEM certificate (" + openssl_reason() + ")")};
  }
  ERR_clear_error();
  return certificates;
}

Result<detail::EvpPkeyPtr, Error> read_private_key(const std::string& path) {
  auto pem = read_file("private key file", path);
  if (!pem) return Failure{pem.error()};
  // "-----BEGIN PRIVATE KEY-----", "... EC PRIVATE KEY-----", "... ENCRYPTED PRIVATE KEY-----"
  // (OpenSSL 3's decoders answer a file without one with a bare "unsupported").
  if (pem->find("PRIVATE KEY-----") == std::string::npos) {
    return Failure{Error("private key file " + path + ": no PEM private key in it")};
  }
  detail::BioPtr bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  ERR_clear_error();
  detail::EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, &no_password, nullptr));
  if (!key) {
    return Failure{Error("private key file " + path +
                         ": not a usable PEM private key, or an encrypted one (" +
                         openssl_reason() + ")")};
  }
  return key;
}

// The DNS names of a certificate's subjectAltName, lower case; wildcards as ".suffix".
void collect_dns_names(X509* certificate, detail::ContextState::Certificate& entry) {
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_DNS) continue;
    const ASN1_IA5STRING* dns = name->d.dNSName;
    std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                     static_cast<size_t>(ASN1_STRING_length(dns)));
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (text.size() > 2 && text[0] == '*' && text[1] == '.') {
      entry.wildcards.push_back(text.substr(1));
    } else if (!text.empty()) {
      entry.exact.push_back(std::move(text));
    }
  }
  GENERAL_NAMES_free(names);
}

struct LoadedCertificate {
  std::vector<detail::X509Ptr> chain;  // leaf first
  detail::EvpPkeyPtr key;
};

Result<LoadedCertificate, Error> load_certificate(const CertificateFiles& files) {
  auto chain = read_certificates("certificate file", files.certificate);
  if (!chain) return Failure{chain.error()};
  auto key = read_private_key(files.private_key);
  if (!key) return Failure{key.error()};
  X509* leaf = (*chain)[0].get();
  ERR_clear_error();
  if (X509_check_private_key(leaf, (*key).get()) != 1) {
    ERR_clear_error();
    return Failure{Error("private key file " + files.private_key +
                         " does not match certificate file " + files.certificate)};
  }
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
    LOG_WARN("TLS: certificate file {} has expired: clients will refuse it", files.certificate);
  }
  return LoadedCertificate{std::move(*chain), std::move(*key)};
}

// ---- settings every SSL_CTX of a context shares ----------------------------------------------

int protocol_version(TlsVersion version) {
  return version == TlsVersion::k1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

Result<void, Error> configure_protocol(SSL_CTX* ctx, TlsVersion min_version, TlsVersion max_version,
                                       const std::string& ciphers, const std::string& ciphersuites,
                                       const std::string& groups) {
  if (min_version > max_version) {
    return Failure{Error("TLS min_version 1.3 is above max_version 1.2")};
  }
  SSL_CTX_set_min_proto_version(ctx, protocol_version(min_version));
  SSL_CTX_set_max_proto_version(ctx, protocol_version(max_version));
  ERR_clear_error();
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) {
    ERR_clear_error();
    return Failure{Error("TLS ciphers '" + ciphers + "': no cipher OpenSSL knows in the list")};
  }
  if (SSL_CTX_set_ciphersuites(ctx, ciphersuites.c_str()) != 1) {
    ERR_clear_error();
    return Failure{Error("TLS 1.3 ciphersuites '" + ciphersuites + "': not a valid list")};
  }
  if (SSL_CTX_set1_groups_list(ctx, groups.c_str()) != 1) {
    ERR_clear_error();
    return Failure{Error("TLS groups '" + groups + "': not a valid list")};
  }
  // Renegotiation is refused both ways (TLS 1.2; 1.3 has none). No compression (CRIME). An
  // EOF without close_notify stays an error (never SSL_OP_IGNORE_UNEXPECTED_EOF).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_clear_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_ALLOW_CLIENT_RENEGOTIATION |
                                 SSL_OP_LEGACY_SERVER_CONNECT |
                                 SSL_OP_ALLOW_UNSAFE_LEGACY_RENEGOTIATION);
  // No SSL_MODE_RELEASE_BUFFERS: it frees and allocates OpenSSL's record buffers (about
  // 34 KiB) around every record, which a busy connection pays for each message. The session's
  // holder frees them once the connection is quiet (TlsSession::release_buffers()).
  static const unsigned char kSessionContext[] = "ucp";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  return {};
}

Result<std::vector<unsigned char>, Error> alpn_wire(const std::vector<std::string>& protocols) {
  if (protocols.size() > kMaxAlpnProtocols) {
    return Failure{Error("TLS alpn: at most " + std::to_string(kMaxAlpnProtocols) + " protocols")};
  }
  std::vector<unsigned char> wire;
  for (const auto& protocol : protocols) {
    if (protocol.empty() || protocol.size() > 255) {
      return Failure{Error("TLS alpn: '" + protocol + "' is not 1 to 255 bytes long")};
    }
    wire.push_back(static_cast<unsigned char>(protocol.size()));
    wire.insert(wire.end(), protocol.begin(), protocol.end());
  }
  return wire;
}

// ---- callbacks ---------------------------------------------------------------------------------

// SNI: switch to the SSL_CTX holding the certificate for the name; no match keeps the default.
int select_certificate(SSL* ssl, int*, void* arg) {
  const auto* state = static_cast<const detail::ContextState*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;
  const size_t index = state->certificate_for(name);
  if (index != 0) SSL_set_SSL_CTX(ssl, state->certificates[index].ctx);
  return SSL_TLSEXT_ERR_OK;
}

// ALPN (RFC 7301): the server's most preferred protocol that the client offers; none in
// common ends the handshake with no_application_protocol.
int select_alpn(SSL*, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void* arg) {
  const auto* state = static_cast<const detail::ContextState*>(arg);
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_length, state->alpn_wire.data(),
                            static_cast<unsigned int>(state->alpn_wire.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = chosen;  // points into state->alpn_wire, which lives as long as the SSL_CTX
  return SSL_TLSEXT_ERR_OK;
}

// Session tickets: AES-256-CBC + HMAC-SHA256 under the ring's keys (RFC 5077's format, which
// OpenSSL builds around what this callback sets up). 1: sealed/opened with the current key;
// 2: opened with the previous key, issue a fresh ticket; 0: unknown key, full handshake.
int ticket_key(SSL* ssl, unsigned char* key_name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
               EVP_MAC_CTX* mac, int seal) {
  const detail::ContextState* state = detail::context_state(SSL_get_SSL_CTX(ssl));
  if (state == nullptr || !state->ticket_keys) return 0;
  TicketKeyRing::Key key;
  bool current = true;
  if (seal == 1) {
    key = state->ticket_keys->sealing_key();
    std::memcpy(key_name, key.name.data(), key.name.size());
    if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1) return -1;
  } else if (!state->ticket_keys->opening_key(key_name, key, current)) {
    return 0;
  }
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(
                                   OSSL_MAC_PARAM_KEY, key.hmac_key.data(), key.hmac_key.size()),
                               OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  const bool ready =
      EVP_MAC_CTX_set_params(mac, params) == 1 &&
      (seal == 1
           ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes_key.data(), iv)
           : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes_key.data(), iv)) == 1;
  OPENSSL_cleanse(&key, sizeof key);
  if (!ready) return -1;
  return current ? 1 : 2;
}

void init_openssl() {
  OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, nullptr);
}

// The CAs of a PEM file as a store for verification, and their names (a server sends them in
// its CertificateRequest).
struct CaList {
  X509StorePtr store;
  X509NamesPtr names;
};
Result<CaList, Error> load_ca_file(std::string_view what, const std::string& path) {
  auto certificates = read_certificates(what, path);
  if (!certificates) return Failure{certificates.error()};
  CaList list{X509StorePtr(X509_STORE_new()), X509NamesPtr(sk_X509_NAME_new_null())};
  if (!list.store || !list.names) return Failure{Error("TLS: out of memory")};
  for (const auto& certificate : *certificates) {
    X509_STORE_add_cert(list.store.get(), certificate.get());
    X509_NAME* name = X509_NAME_dup(X509_get_subject_name(certificate.get()));
    if (name != nullptr && sk_X509_NAME_push(list.names.get(), name) == 0) X509_NAME_free(name);
  }
  ERR_clear_error();
  return list;
}

Result<void, Error> use_certificate(SSL_CTX* ctx, const CertificateFiles& files,
                                    LoadedCertificate& loaded) {
  ERR_clear_error();
  if (SSL_CTX_use_certificate(ctx, loaded.chain[0].get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, loaded.key.get()) != 1) {
    // e.g. "ee key too small": the security level refuses the key
    return Failure{Error("certificate file " + files.certificate + ": " + openssl_reason())};
  }
  for (size_t i = 1; i < loaded.chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, loaded.chain[i].get()) != 1) {
      return Failure{Error("certificate file " + files.certificate + ": " + openssl_reason())};
    }
  }
  return {};
}

}  // namespace

size_t detail::ContextState::certificate_for(std::string_view server_name) const noexcept {
  char lower[256];
  if (server_name.empty() || server_name.size() > sizeof lower) return 0;
  if (server_name.back() == '.') server_name.remove_suffix(1);  // "example.com." is absolute
  for (size_t i = 0; i < server_name.size(); ++i) {
    lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(server_name[i])));
  }
  const std::string_view name(lower, server_name.size());
  for (size_t i = 0; i < certificates.size(); ++i) {
    for (const auto& exact : certificates[i].exact) {
      if (exact == name) return i;
    }
  }
  // "*.example.com" matches one label: "a.example.com", not "example.com" nor "a.b.example.com".
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return 0;
  const std::string_view suffix = name.substr(dot);
  for (size_t i = 0; i < certificates.size(); ++i) {
    for (const auto& wildcard : certificates[i].wildcards) {
      if (wildcard == suffix) return i;
    }
  }
  return 0;
}

const detail::ContextState* detail::context_state(const SSL_CTX* ctx) noexcept {
  if (ctx == nullptr) return nullptr;
  return static_cast<const detail::ContextState*>(SSL_CTX_get_ex_data(ctx, view_index()));
}

Result<std::shared_ptr<const TlsContext>, Error> TlsContext::server(const TlsOptions& options) {
  init_openssl();
  if (options.certificates.empty()) {
    return Failure{Error("TLS server: no certificate (certificate and private_key)")};
  }
  if (options.verify_client != VerifyClient::kNone && options.client_ca.empty()) {
    return Failure{Error("TLS verify_client: client certificates need a client_ca file")};
  }
  auto state = std::make_unique<detail::ContextState>();
  state->server = true;
  state->handshake_timeout_ms = options.handshake_timeout_ms;
  state->alpn = options.alpn;
  auto wire = alpn_wire(options.alpn);
  if (!wire) return Failure{wire.error()};
  state->alpn_wire = std::move(*wire);
  if (options.session_tickets) {
    state->ticket_keys = options.ticket_keys;
    if (!state->ticket_keys) {
      state->ticket_keys = TicketKeyRing::create(options.ticket_key_rotation_s);
      if (!state->ticket_keys) return Failure{Error("TLS: cannot make session ticket keys")};
    }
  }
  CaList client_cas;
  if (!options.client_ca.empty()) {
    auto cas = load_ca_file("client CA file", options.client_ca);
    if (!cas) return Failure{cas.error()};
    client_cas = std::move(*cas);
  }

  std::vector<detail::SslCtxPtr> contexts;
  for (const auto& files : options.certificates) {
    auto loaded = load_certificate(files);
    if (!loaded) return Failure{loaded.error()};
    detail::SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
    if (!ctx) return Failure{Error("TLS: cannot make an SSL_CTX: " + openssl_reason())};
    if (auto configured = configure_protocol(ctx.get(), options.min_version, options.max_version,
                                             options.ciphers, options.ciphersuites, options.groups);
        !configured) {
      return Failure{configured.error()};
    }
    if (auto used = use_certificate(ctx.get(), files, *loaded); !used) {
      return Failure{used.error()};
    }
    // The server's order decides (AES-GCM first, the strongest a client offers), except that a
    // client listing ChaCha20 first gets it (it has no AES instructions): as testssl asks, and
    // as Go and Caddy do.
    SSL_CTX_set_options(ctx.get(), SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    // Stateless resumption only: tickets carry the session, the server keeps no cache (no
    // lock shared by the workers, no memory per client). A ticket's lifetime is one rotation.
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
    if (state->ticket_keys) {
      SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx.get(), &ticket_key);
      SSL_CTX_set_timeout(ctx.get(), std::max<long>(1, state->ticket_keys->rotation_s()));
    } else {
      SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
      SSL_CTX_set_num_tickets(ctx.get(), 0);
    }
    if (options.verify_client != VerifyClient::kNone) {
      const int mode = options.verify_client == VerifyClient::kRequire
                           ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                           : SSL_VERIFY_PEER;
      SSL_CTX_set_verify(ctx.get(), mode, nullptr);
      SSL_CTX_set1_cert_store(ctx.get(), client_cas.store.get());
      SSL_CTX_set_client_CA_list(ctx.get(), SSL_dup_CA_list(client_cas.names.get()));
    }
    if (!state->alpn_wire.empty()) SSL_CTX_set_alpn_select_cb(ctx.get(), &select_alpn, state.get());
    // SSL_CTX_set_tlsext_servername_callback, without the macro's C-style cast.
    SSL_CTX_callback_ctrl(ctx.get(), SSL_CTRL_SET_TLSEXT_SERVERNAME_CB,
                          reinterpret_cast<void (*)()>(&select_certificate));
    SSL_CTX_set_tlsext_servername_arg(ctx.get(), state.get());
    SSL_CTX_set_ex_data(ctx.get(), view_index(), state.get());

    detail::ContextState::Certificate entry;
    collect_dns_names(loaded->chain[0].get(), entry);
    state->certificates.push_back(std::move(entry));
    contexts.push_back(std::move(ctx));
  }
  // Hand the SNI contexts to the state and the state to the main context.
  for (size_t i = 0; i < contexts.size(); ++i) {
    state->certificates[i].ctx = i == 0 ? contexts[0].get() : contexts[i].release();
  }
  SSL_CTX* main = contexts[0].release();
  SSL_CTX_set_ex_data(main, owner_index(), state.release());
  return std::make_shared<const TlsContext>(Token{}, main);
}

Result<std::shared_ptr<const TlsContext>, Error> TlsContext::client(
    const TlsClientOptions& options) {
  init_openssl();
  auto state = std::make_unique<detail::ContextState>();
  state->handshake_timeout_ms = options.handshake_timeout_ms;
  state->sessions = std::make_unique<TlsSessionCache>();
  state->alpn = options.alpn;
  auto wire = alpn_wire(options.alpn);
  if (!wire) return Failure{wire.error()};
  state->alpn_wire = std::move(*wire);

  detail::SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Failure{Error("TLS: cannot make an SSL_CTX: " + openssl_reason())};
  if (auto configured = configure_protocol(ctx.get(), options.min_version, options.max_version,
                                           options.ciphers, options.ciphersuites, options.groups);
      !configured) {
    return Failure{configured.error()};
  }
  if (options.verify_peer) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (options.ca_file.empty()) {
      // The system store: /etc/ssl/certs (OpenSSL's default paths, or SSL_CERT_FILE/_DIR).
      if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
        return Failure{Error("TLS: cannot use the system CA store: " + openssl_reason())};
      }
    } else {
      auto cas = load_ca_file("CA file", options.ca_file);
      if (!cas) return Failure{cas.error()};
      SSL_CTX_set1_cert_store(ctx.get(), cas->store.get());
    }
  }
  if (!options.certificate.certificate.empty() || !options.certificate.private_key.empty()) {
    auto loaded = load_certificate(options.certificate);
    if (!loaded) return Failure{loaded.error()};
    if (auto used = use_certificate(ctx.get(), options.certificate, *loaded); !used) {
      return Failure{used.error()};
    }
  }
  if (!state->alpn_wire.empty() &&
      SSL_CTX_set_alpn_protos(ctx.get(), state->alpn_wire.data(),
                              static_cast<unsigned int>(state->alpn_wire.size())) != 0) {
    return Failure{Error("TLS alpn: OpenSSL refused the list")};
  }
  // Sessions go to the TlsSessionCache a connection names (TlsSession::connect), not to a
  // cache inside the SSL_CTX.
  SSL_CTX_set_session_cache_mode(ctx.get(),
                                 SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx.get(), &detail::store_client_session);
  SSL_CTX_set_ex_data(ctx.get(), view_index(), state.get());
  state->certificates.push_back({ctx.get(), {}, {}});
  SSL_CTX* main = ctx.release();
  SSL_CTX_set_ex_data(main, owner_index(), state.release());
  return std::make_shared<const TlsContext>(Token{}, main);
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

const detail::ContextState& TlsContext::state() const noexcept {
  return *detail::context_state(ctx_);
}

bool TlsContext::is_server() const noexcept { return state().server; }

std::span<const std::string> TlsContext::alpn_protocols() const noexcept { return state().alpn; }

TlsSessionCache* TlsContext::session_cache() const noexcept { return state().sessions.get(); }

uint32_t TlsContext::handshake_timeout_ms() const noexcept { return state().handshake_timeout_ms; }

const std::shared_ptr<TicketKeyRing>& TlsContext::ticket_keys() const noexcept {
  return state().ticket_keys;
}

}  // namespace ucp::tls
