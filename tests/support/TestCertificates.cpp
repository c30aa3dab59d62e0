#include "TestCertificates.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <malloc.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#ifdef UCP_SANITIZER_BUILD
// <sanitizer/allocator_interface.h> ships with clang, not with GCC 12; ASan and TSan
// runtimes of both define it.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace ucp::test {
namespace {

std::atomic<long> next_serial{1};

// Test set-up: a failure here is a broken machine, not a test result.
[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "TestCertificates: %s\n", what.c_str());
  std::abort();
}

EVP_PKEY* make_key(KeyKind kind) {
  EVP_PKEY* key = kind == KeyKind::kRsa2048
                      ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})
                      : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key == nullptr) fail("key generation failed");
  return key;
}

void add_extension(X509* certificate, X509V3_CTX& context, int nid, const std::string& value) {
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  if (extension == nullptr || X509_add_ext(certificate, extension, -1) != 1) {
    fail("extension " + value);
  }
  X509_EXTENSION_free(extension);
}

X509* new_certificate(EVP_PKEY* key, const std::string& common_name, int64_t not_before_s,
                      int64_t not_after_s) {
  X509* certificate = X509_new();
  X509_set_version(certificate, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(certificate), next_serial++);
  X509_gmtime_adj(X509_getm_notBefore(certificate), static_cast<long>(not_before_s));
  X509_gmtime_adj(X509_getm_notAfter(certificate), static_cast<long>(not_after_s));
  X509_set_pubkey(certificate, key);
  X509_NAME* name = X509_get_subject_name(certificate);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("UCP tests"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  return certificate;
}

void write_pem(const std::string& path, X509* certificate, EVP_PKEY* key) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) fail("cannot write " + path);
  const bool ok = certificate != nullptr
                      ? PEM_write_X509(file, certificate) == 1
                      : PEM_write_PrivateKey(file, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::fclose(file);
  if (!ok) fail("cannot write " + path);
}

}  // namespace

TestCa::TestCa(const std::string& directory, const std::string& file_stem, const std::string& name)
    : key_(make_key(KeyKind::kEcdsaP256)), certificate_file_(directory + "/" + file_stem + ".pem") {
  certificate_ = new_certificate(key_, name, -86400, 3650L * 86400);
  X509_set_issuer_name(certificate_, X509_get_subject_name(certificate_));
  X509V3_CTX context;
  X509V3_set_ctx(&context, certificate_, certificate_, nullptr, nullptr, 0);
  add_extension(certificate_, context, NID_basic_constraints, "critical,CA:TRUE");
  add_extension(certificate_, context, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(certificate_, context, NID_subject_key_identifier, "hash");
  if (X509_sign(certificate_, key_, EVP_sha256()) == 0) fail("signing the CA");
  write_pem(certificate_file_, certificate_, nullptr);
}

TestCa::~TestCa() {
  X509_free(certificate_);
  EVP_PKEY_free(key_);
}

IssuedCertificate TestCa::issue(const std::string& path_stem,
                                const CertificateRequest& request) const {
  EVP_PKEY* key = make_key(request.key);
  X509* certificate =
      new_certificate(key, request.common_name, request.not_before_s, request.not_after_s);
  X509_set_issuer_name(certificate, X509_get_subject_name(certificate_));
  X509V3_CTX context;
  X509V3_set_ctx(&context, certificate_, certificate, nullptr, nullptr, 0);
  add_extension(certificate, context, NID_basic_constraints, "critical,CA:FALSE");
  add_extension(certificate, context, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_extension(certificate, context, NID_ext_key_usage,
                request.client ? "clientAuth" : "serverAuth");
  add_extension(certificate, context, NID_subject_key_identifier, "hash");
  add_extension(certificate, context, NID_authority_key_identifier, "keyid:always");
  std::string names;
  for (const auto& dns : request.dns_names) names += (names.empty() ? "DNS:" : ",DNS:") + dns;
  for (const auto& ip : request.ip_addresses) names += (names.empty() ? "IP:" : ",IP:") + ip;
  if (!names.empty()) add_extension(certificate, context, NID_subject_alt_name, names);
  if (X509_sign(certificate, key_, EVP_sha256()) == 0) fail("signing " + path_stem);
  IssuedCertificate issued{path_stem + ".crt.pem", path_stem + ".key.pem"};
  write_pem(issued.certificate, certificate, nullptr);
  write_pem(issued.private_key, nullptr, key);
  X509_free(certificate);
  EVP_PKEY_free(key);
  return issued;
}

TestPki::TestPki() {
  char pattern[] = "/tmp/ucp-tls-test-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) fail("mkdtemp");
  directory = pattern;
  ca = std::make_unique<TestCa>(directory, "ca", "UCP Test CA");
  other_ca = std::make_unique<TestCa>(directory, "other-ca", "Some Other CA");
  ca_file = ca->certificate_file();
  auto ecdsa_request =
      certificate_request("localhost", {"localhost", "example.test", "*.wild.test"});
  ecdsa_request.ip_addresses = {"127.0.0.1"};
  ecdsa = ca->issue(directory + "/ecdsa", ecdsa_request);
  auto rsa_request = certificate_request("rsa.test", {"rsa.test", "localhost"});
  rsa_request.key = KeyKind::kRsa2048;
  rsa = ca->issue(directory + "/rsa", rsa_request);
  auto expired_request = certificate_request("localhost", {"localhost"});
  expired_request.not_before_s = -7 * 86400;
  expired_request.not_after_s = -86400;
  expired = ca->issue(directory + "/expired", expired_request);
  untrusted =
      other_ca->issue(directory + "/untrusted", certificate_request("localhost", {"localhost"}));
  auto client_request = certificate_request("client.test", {"client.test"});
  client_request.client = true;
  client = ca->issue(directory + "/client", client_request);
  auto rogue_request = certificate_request("rogue.test", {"rogue.test"});
  rogue_request.client = true;
  untrusted_client = other_ca->issue(directory + "/rogue", rogue_request);
}

const TestPki& TestPki::get() {
  static const TestPki pki;
  // Removed at exit, after the tests (a static made later is destroyed earlier).
  static const struct Remover {
    ~Remover() {
      std::error_code ignored;
      std::filesystem::remove_all(pki.directory, ignored);
    }
  } remover;
  return pki;
}

size_t live_heap_bytes() {
#ifdef UCP_SANITIZER_BUILD
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}

}  // namespace ucp::test
