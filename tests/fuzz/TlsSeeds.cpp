// Writes the seed corpus of tls_server_fuzz: real ClientHellos from the engine's client side
// (TLS 1.3 and 1.2, SNI and ALPN variants, resumption with a ticket), as a server receives them.
// Built with the fuzzers; run by hand when the seeds should change (they are committed):
//
//   build/fuzz/bin/tls_seeds tests/fuzz/corpus/tls_server

#include <cstdio>
#include <string>

#include "ucp/tls/TlsContext.h"
#include "ucp/tls/TlsSession.h"
#include "ucp/tls/TlsSessionCache.h"

#include "TestCertificates.h"
#include "TlsLink.h"

namespace {

using namespace ucp::tls;

bool write_seed(const std::string& directory, const std::string& name, const std::string& data) {
  const std::string path = directory + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool ok = std::fwrite(data.data(), 1, data.size(), file) == data.size();
  std::fclose(file);
  std::printf("%s: %zu bytes\n", path.c_str(), data.size());
  return ok;
}

std::shared_ptr<const TlsContext> client(TlsVersion max_version, std::vector<std::string> alpn) {
  const auto& pki = ucp::test::TestPki::get();
  TlsClientOptions options;
  options.ca_file = pki.ca_file;
  options.max_version = max_version;
  options.alpn = std::move(alpn);
  return *TlsContext::client(options);
}

// The first flight of a client session.
std::string client_hello(const TlsContext& context, std::string_view name,
                         TlsSessionCache* cache = nullptr) {
  auto session = TlsSession::connect(context, name, cache);
  if (!session || !session->handshake()) return {};
  return ucp::test::take_output(*session);
}

// A full handshake that leaves a ticket in `cache`.
void fill_cache(const TlsContext& context, TlsSessionCache& cache) {
  const auto& pki = ucp::test::TestPki::get();
  TlsOptions options;
  options.certificates = {{pki.ecdsa.certificate, pki.ecdsa.private_key}};
  auto server = *TlsContext::server(options);
  ucp::test::TlsLink link(*TlsSession::connect(context, "localhost", &cache),
                          *TlsSession::accept(*server));
  link.handshake();
  link.receive(link.client);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const auto tls13 = client(TlsVersion::k1_3, {"http/1.1"});
  const auto tls12 = client(TlsVersion::k1_2, {"http/1.1"});
  const auto h2 = client(TlsVersion::k1_3, {"h2", "http/1.1"});
  const auto bare = client(TlsVersion::k1_3, {});
  TlsSessionCache cache13, cache12;
  fill_cache(*tls13, cache13);
  fill_cache(*tls12, cache12);
  bool ok = write_seed(dir, "hello_tls13", client_hello(*tls13, "localhost")) &&
            write_seed(dir, "hello_tls12", client_hello(*tls12, "localhost")) &&
            write_seed(dir, "hello_h2_rsa_sni", client_hello(*h2, "rsa.test")) &&
            write_seed(dir, "hello_no_sni_no_alpn", client_hello(*bare, "127.0.0.1")) &&
            write_seed(dir, "hello_tls13_ticket", client_hello(*tls13, "localhost", &cache13)) &&
            write_seed(dir, "hello_tls12_ticket", client_hello(*tls12, "localhost", &cache12));
  return ok ? 0 : 1;
}
